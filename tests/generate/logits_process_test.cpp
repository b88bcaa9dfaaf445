#include "tfm/generation/logits_process.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/error_of.h"
#include "test_util.h"
#include "tfm/core/error.h"

namespace tfm {
namespace {

using tfm::test_support::error_of;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> apply(const LogitsProcessor& p, std::vector<int64_t> ids, std::vector<float> scores) {
  p(ids, scores);
  return scores;
}

std::vector<float> logs(std::vector<double> probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

// Which entries are -inf, as a string such as "..x." (x = filtered).
std::string mask(const std::vector<float>& v) {
  std::string out;
  for (float x : v) out += x == -kInf ? 'x' : '.';
  return out;
}

TEST(RepetitionPenalty, DividesPositiveAndMultipliesNegativeScoresOfSeenTokensOnce) {
  RepetitionPenaltyLogitsProcessor p(2.0);
  EXPECT_EQ(apply(p, {0, 1, 0, 2}, {2, -2, 0, 1}), (std::vector<float>{1, -4, 0, 1}));
  EXPECT_EQ(apply(p, {}, {2, -2}), (std::vector<float>{2, -2}));
  EXPECT_THROW(apply(p, {5}, {1, 2}), Error);
  EXPECT_EQ(error_of([] { RepetitionPenaltyLogitsProcessor(0.0); }),
            "`penalty` has to be a strictly positive float, but is 0.0");
}

TEST(SequenceBias, BiasesTheTokenThatCompletesASequence) {
  SequenceBiasLogitsProcessor p(
      {{{1}, 2.0f}, {{3, 2}, -1.0f}, {{0, 2}, 0.5f}, {{1}, 3.0f}});  // {1}: last wins
  EXPECT_EQ(apply(p, {5, 3}, {0, 0, 0, 0}), (std::vector<float>{0, 3, -1, 0}));
  EXPECT_EQ(apply(p, {3, 0}, {0, 0, 0, 0}), (std::vector<float>{0, 3, 0.5, 0}));
  EXPECT_EQ(error_of([] {
              apply(SequenceBiasLogitsProcessor({{{9}, 1.0f}}), {}, {0, 0, 0});
            }),
            "The model vocabulary size is 3, but the following tokens were being biased: [9]");
  NoBadWordsLogitsProcessor bad({{4}, {2}, {5, 1}}, {2});  // [2] alone is an EOS: kept possible
  EXPECT_EQ(mask(apply(bad, {0, 5}, std::vector<float>(6, 0))), ".x..x.");
  EXPECT_EQ(mask(apply(bad, {5}, std::vector<float>(6, 0))),
            "....x.");  // as Transformers: needs len + 1 tokens
  EXPECT_EQ(mask(apply(bad, {1}, std::vector<float>(6, 0))), "....x.");
}

TEST(NoRepeatNGram, BansTokensThatWouldRepeatAnNGram) {
  NoRepeatNGramLogitsProcessor bigram(2);
  EXPECT_EQ(mask(apply(bigram, {1, 2, 1, 3, 1}, std::vector<float>(5, 0))), "..xx.");
  NoRepeatNGramLogitsProcessor trigram(3);
  EXPECT_EQ(mask(apply(trigram, {1, 2, 3, 1, 2}, std::vector<float>(5, 0))), "...x.");
  EXPECT_EQ(mask(apply(trigram, {1, 2}, std::vector<float>(5, 0))), ".....");  // no complete trigram yet
  NoRepeatNGramLogitsProcessor unigram(1);
  EXPECT_EQ(mask(apply(unigram, {4, 0}, std::vector<float>(5, 0))), "x...x");
}

TEST(MinLength, SuppressesEveryEosUntilTheLengthIsReached) {
  MinLengthLogitsProcessor p(3, {1, 9});  // 9 lies outside the row and matches nothing
  EXPECT_EQ(mask(apply(p, {0, 0}, std::vector<float>(4, 1))), ".x..");
  EXPECT_EQ(mask(apply(p, {0, 0, 0}, std::vector<float>(4, 1))), "....");
  MinNewTokensLengthLogitsProcessor q(2, 2, {0, 3});
  EXPECT_EQ(mask(apply(q, {5, 5, 5}, std::vector<float>(4, 1))), "x..x");
  EXPECT_EQ(mask(apply(q, {5, 5, 5, 5}, std::vector<float>(4, 1))), "....");
}

TEST(Temperature, DividesAndRejectsNonPositive) {
  TemperatureLogitsWarper p(0.5);
  EXPECT_EQ(apply(p, {}, {1, -2}), (std::vector<float>{2, -4}));
  EXPECT_EQ(
      error_of([] { TemperatureLogitsWarper(0.0); }),
      "`temperature` (=0.0) has to be a strictly positive float, otherwise your next token scores will be "
      "invalid. If you're looking for greedy decoding strategies, set `do_sample=False`.");
  EXPECT_THROW(TemperatureLogitsWarper(-1.0), Error);
}

TEST(TopK, KeepsTheKHighestAndEverythingTiedWithTheKth) {
  EXPECT_EQ(mask(apply(TopKLogitsWarper(2), {}, {1, 3, 3, 2})), "x..x");
  EXPECT_EQ(mask(apply(TopKLogitsWarper(2), {}, {3, 1, 3, 3})), ".x..");
  EXPECT_EQ(mask(apply(TopKLogitsWarper(1, 3), {}, {1, 3, 4, 2})), "x...");  // min_tokens_to_keep raises k
  EXPECT_EQ(mask(apply(TopKLogitsWarper(10), {}, {1, 3})), "..");
  EXPECT_EQ(error_of([] { TopKLogitsWarper(-3); }),
            "`top_k` has to be a strictly positive integer, but is -3");
}

TEST(TopP, DropsTheTailWithinOneMinusTopP) {
  const std::vector<float> row = logs({0.1, 0.2, 0.3, 0.4});
  EXPECT_EQ(mask(apply(TopPLogitsWarper(0.5), {}, row)), "xx..");
  EXPECT_EQ(mask(apply(TopPLogitsWarper(0.75), {}, row)), "x...");
  EXPECT_EQ(mask(apply(TopPLogitsWarper(0.5, 3), {}, row)), "x...");
  EXPECT_EQ(mask(apply(TopPLogitsWarper(0.0), {}, row)), "xxx.");
  EXPECT_EQ(error_of([] { TopPLogitsWarper(1.5); }), "`top_p` has to be a float > 0 and < 1, but is 1.5");
  EXPECT_EQ(error_of([] { TopPLogitsWarper(0.5, 0); }),
            "`min_tokens_to_keep` has to be a positive integer, but is 0");
}

TEST(MinP, DropsTokensBelowMinPTimesTheTopProbability) {
  const std::vector<float> row = logs({0.5, 0.3, 0.15, 0.05});
  EXPECT_EQ(mask(apply(MinPLogitsWarper(0.2), {}, row)), "...x");
  EXPECT_EQ(mask(apply(MinPLogitsWarper(0.5), {}, row)), "..xx");
  EXPECT_EQ(mask(apply(MinPLogitsWarper(0.5, 3), {}, row)), "...x");
  EXPECT_EQ(mask(apply(MinPLogitsWarper(0.0), {}, row)), "....");
  EXPECT_EQ(error_of([] { MinPLogitsWarper(1.5); }),
            "`min_p` has to be a float in the [0, 1] interval, but is 1.5");
}

TEST(Typical, KeepsTheTokensClosestToTheEntropy) {
  // Entropy of (0.7, 0.1, 0.1, 0.1) is 0.94 nats: token 0 (surprisal 0.36) is closest, the others tie
  // at 2.30.
  const std::vector<float> row = logs({0.7, 0.1, 0.1, 0.1});
  EXPECT_EQ(mask(apply(TypicalLogitsWarper(0.5), {}, row)), ".xxx");
  EXPECT_EQ(mask(apply(TypicalLogitsWarper(0.75), {}, row)), "....");  // the cut falls in the tie: all kept
  EXPECT_EQ(mask(apply(TypicalLogitsWarper(0.5, 2), {}, row)), "..xx");
  EXPECT_EQ(mask(apply(TypicalLogitsWarper(0.3), {}, logs({0.25, 0.25, 0.25, 0.25}))), "....");
  EXPECT_EQ(error_of([] { TypicalLogitsWarper(1.0); }),
            "`typical_p` has to be a float > 0 and < 1, but is 1.0");
}

LengthLimits limits(int64_t min_length, int64_t max_length = 100) {
  return LengthLimits{max_length, min_length};
}

TEST(ForcedAndSuppressedTokens, FollowTheLength) {
  EXPECT_EQ(apply(ForcedBOSTokenLogitsProcessor(2), {7}, {1, 1, 1}), (std::vector<float>{-kInf, -kInf, 0}));
  EXPECT_EQ(mask(apply(ForcedBOSTokenLogitsProcessor(2), {7, 7}, {1, 1, 1})), "...");
  ForcedEOSTokenLogitsProcessor eos(4, {0, 2});
  EXPECT_EQ(apply(eos, {7, 7, 7}, {1, 1, 1}), (std::vector<float>{0, -kInf, 0}));
  EXPECT_EQ(mask(apply(eos, {7, 7}, {1, 1, 1})), "...");
  EXPECT_EQ(mask(apply(SuppressTokensLogitsProcessor({1, 5}), {}, {1, 1, 1})), ".x.");
  SuppressTokensAtBeginLogitsProcessor begin({0}, 2);
  EXPECT_EQ(mask(apply(begin, {7, 7}, {1, 1})), "x.");
  EXPECT_EQ(mask(apply(begin, {7, 7, 7}, {1, 1})), "..");
  const std::vector<float> fixed = apply(InfNanRemoveLogitsProcessor(), {}, {NAN, kInf, -kInf, 2});
  EXPECT_EQ(fixed, (std::vector<float>{0, std::numeric_limits<float>::max(),
                                       std::numeric_limits<float>::lowest(), 2}));
}

TEST(ExponentialDecayLengthPenalty, RaisesEosScoresPastTheStart) {
  ExponentialDecayLengthPenalty p(2, 2.0, {0, 2}, 3);  // regulation starts after 3 + 2 tokens
  EXPECT_EQ(apply(p, {9, 9, 9, 9, 9}, {-1, 1, 4}), (std::vector<float>{-1, 1, 4}));
  EXPECT_EQ(apply(p, {9, 9, 9, 9, 9, 9}, {-1, 1, 4}), (std::vector<float>{0, 1, 8}));      // * (2^1 - 1)
  EXPECT_EQ(apply(p, {9, 9, 9, 9, 9, 9, 9}, {-1, 1, 4}), (std::vector<float>{2, 1, 16}));  // * (2^2 - 1)
  EXPECT_THROW(ExponentialDecayLengthPenalty(2, 2.0, {}, 3), Error);
}

TEST(EpsilonEtaAndNormalization, CutSmallProbabilities) {
  const std::vector<float> row = logs({0.6, 0.3, 0.09, 0.01});
  EXPECT_EQ(mask(apply(EpsilonLogitsWarper(0.05), {}, row)), "...x");
  EXPECT_EQ(mask(apply(EpsilonLogitsWarper(0.5), {}, row)), ".xxx");
  EXPECT_EQ(mask(apply(EpsilonLogitsWarper(0.5, 2), {}, row)), "..xx");
  // Entropy 0.938 nats: eta = min(0.5, sqrt(0.5) * exp(-0.938)) = 0.277.
  EXPECT_EQ(mask(apply(EtaLogitsWarper(0.5), {}, row)), "..xx");
  const std::vector<float> normalized = apply(LogitNormalization(), {}, {1, 1});
  EXPECT_FLOAT_EQ(normalized[0], std::log(0.5f));
  EXPECT_EQ(error_of([] { EpsilonLogitsWarper(0.0); }),
            "`epsilon_cutoff` has to be a float > 0 and < 1, but is 0.0");
}

std::vector<std::string> names(const LogitsProcessorList& list) {
  std::vector<std::string> out;
  for (size_t i = 0; i < list.size(); ++i) out.emplace_back(list[i].name());
  return out;
}

GenerationConfig prepared(const char* model_json, const char* kwargs_json = "{}") {
  return prepare_generation_config(GenerationConfig::from_json(json::parse(model_json)),
                                   json::parse(kwargs_json).as_object())
      .config;
}

TEST(BuildLogitsProcessors, FollowsTransformersOrderAndConditions) {
  const GenerationConfig all = prepared(
      R"({"eos_token_id": 2, "do_sample": true, "temperature": 0.7, "sequence_bias": [[[1, 2], 1.5]],
          "bad_words_ids": [[7], [8, 9]], "top_k": 10, "top_p": 0.9, "min_p": 0.05,
          "typical_p": 0.9, "repetition_penalty": 1.1, "no_repeat_ngram_size": 3, "min_new_tokens": 2,
          "forced_bos_token_id": 1, "forced_eos_token_id": 2, "remove_invalid_values": true, "suppress_tokens": [3],
          "begin_suppress_tokens": [4], "exponential_decay_length_penalty": [4, 1.1], "epsilon_cutoff": 3e-4, "eta_cutoff": 2e-3, "renormalize_logits": true})");
  EXPECT_EQ(names(build_logits_processors(all, 5, limits(7))),
            (std::vector<std::string>{"SequenceBiasLogitsProcessor",
                                      "RepetitionPenaltyLogitsProcessor",
                                      "NoRepeatNGramLogitsProcessor",
                                      "NoBadWordsLogitsProcessor",
                                      "MinLengthLogitsProcessor",
                                      "MinNewTokensLengthLogitsProcessor",
                                      "ForcedBOSTokenLogitsProcessor",
                                      "ForcedEOSTokenLogitsProcessor",
                                      "InfNanRemoveLogitsProcessor",
                                      "ExponentialDecayLengthPenalty",
                                      "SuppressTokensLogitsProcessor",
                                      "SuppressTokensAtBeginLogitsProcessor",
                                      "TemperatureLogitsWarper",
                                      "TopKLogitsWarper",
                                      "TopPLogitsWarper",
                                      "MinPLogitsWarper",
                                      "TypicalLogitsWarper",
                                      "EpsilonLogitsWarper",
                                      "EtaLogitsWarper",
                                      "LogitNormalization"}));
  // Greedy: no warpers; the min-length processors need an EOS.
  const GenerationConfig greedy = prepared(R"({"temperature": 0.7, "min_new_tokens": 2})");
  EXPECT_EQ(names(build_logits_processors(greedy, 5, limits(7))), std::vector<std::string>{});
  // Defaults: top_k=50 is the only active warper when sampling.
  EXPECT_EQ(names(build_logits_processors(prepared(R"({"do_sample": true})"), 5, limits(0))),
            std::vector<std::string>{"TopKLogitsWarper"});
  EXPECT_EQ(names(build_logits_processors(prepared(R"({"do_sample": true, "top_k": 0, "min_p": 0.0})"), 5,
                                          limits(0))),
            std::vector<std::string>{"MinPLogitsWarper"});
}

TEST(BuildLogitsProcessors, RejectsInvalidValuesAndUnimplementedFeatures) {
  EXPECT_EQ(error_of([] {
              build_logits_processors(prepared(R"({"do_sample": true, "temperature": 0.0})"), 1, limits(0));
            }).rfind("`temperature` (=0.0) has to be a strictly positive float", 0),
            0u);
  EXPECT_NO_THROW(
      build_logits_processors(prepared(R"({"temperature": 0.0})"), 1, limits(0)));  // greedy: not built
  EXPECT_THROW(build_logits_processors(prepared(R"({"do_sample": true, "top_k": -1})"), 1, limits(0)), Error);
  EXPECT_EQ(
      error_of([] { build_logits_processors(prepared(R"({"num_beams": 4})"), 1, limits(0)); }),
      "generation config: num_beams=4 asks for beam search, which tfm does not implement (it runs greedy "
      "search and sampling, num_beams=1)");
  EXPECT_EQ(error_of([] { build_logits_processors(prepared(R"({"guidance_scale": 1.5})"), 1, limits(0)); }),
            "generation config: `guidance_scale` is set, but tfm does not implement that generation feature");
  // Transformers builds no warper for a top-p or typical-p of 1 or more, or a cutoff outside (0, 1), and so
  // says nothing about top_p=2; tfm builds it, and its check says what is wrong.
  EXPECT_EQ(error_of([] {
              build_logits_processors(prepared(R"({"do_sample": true, "top_p": 2.0})"), 1, limits(0));
            }),
            "`top_p` has to be a float > 0 and < 1, but is 2.0");
  EXPECT_EQ(error_of([] {
              build_logits_processors(prepared(R"({"do_sample": true, "eta_cutoff": 1.5})"), 1, limits(0));
            }),
            "`eta_cutoff` has to be a float > 0 and < 1, but is 1.5");
  EXPECT_EQ(
      names(build_logits_processors(
          prepared(R"({"do_sample": true, "top_k": 0, "top_p": 1.0, "typical_p": 1.0, "eta_cutoff": 0.0})"),
          1, limits(0))),
      std::vector<std::string>{});
}

// ---- against Transformers' recorded outputs
// -------------------------------------------------------------------

std::unique_ptr<LogitsProcessor> make(const std::string& name, const json::Value& a) {
  auto keep = [&] {
    return a.contains("min_tokens_to_keep") ? a.at("min_tokens_to_keep").as_int() : int64_t{1};
  };
  if (name == "RepetitionPenaltyLogitsProcessor")
    return std::make_unique<RepetitionPenaltyLogitsProcessor>(a.at("penalty").as_double());
  if (name == "NoRepeatNGramLogitsProcessor")
    return std::make_unique<NoRepeatNGramLogitsProcessor>(a.at("ngram_size").as_int());
  if (name == "MinLengthLogitsProcessor")
    return std::make_unique<MinLengthLogitsProcessor>(a.at("min_length").as_int(),
                                                      testing::ids_of(a.at("eos_token_id")));
  if (name == "MinNewTokensLengthLogitsProcessor")
    return std::make_unique<MinNewTokensLengthLogitsProcessor>(a.at("prompt_length_to_skip").as_int(),
                                                               a.at("min_new_tokens").as_int(),
                                                               testing::ids_of(a.at("eos_token_id")));
  if (name == "TemperatureLogitsWarper")
    return std::make_unique<TemperatureLogitsWarper>(a.at("temperature").as_double());
  if (name == "TopKLogitsWarper") return std::make_unique<TopKLogitsWarper>(a.at("top_k").as_int(), keep());
  if (name == "TopPLogitsWarper")
    return std::make_unique<TopPLogitsWarper>(a.at("top_p").as_double(), keep());
  if (name == "MinPLogitsWarper")
    return std::make_unique<MinPLogitsWarper>(a.at("min_p").as_double(), keep());
  if (name == "TypicalLogitsWarper")
    return std::make_unique<TypicalLogitsWarper>(a.at("mass").as_double(), keep());
  if (name == "EpsilonLogitsWarper")
    return std::make_unique<EpsilonLogitsWarper>(a.at("epsilon").as_double(), keep());
  if (name == "EtaLogitsWarper")
    return std::make_unique<EtaLogitsWarper>(a.at("epsilon").as_double(), keep());
  if (name == "ForcedBOSTokenLogitsProcessor")
    return std::make_unique<ForcedBOSTokenLogitsProcessor>(a.at("bos_token_id").as_int());
  if (name == "ForcedEOSTokenLogitsProcessor")
    return std::make_unique<ForcedEOSTokenLogitsProcessor>(a.at("max_length").as_int(),
                                                           testing::ids_of(a.at("eos_token_id")));
  if (name == "InfNanRemoveLogitsProcessor") return std::make_unique<InfNanRemoveLogitsProcessor>();
  if (name == "SuppressTokensLogitsProcessor")
    return std::make_unique<SuppressTokensLogitsProcessor>(testing::ids_of(a.at("suppress_tokens")));
  if (name == "SuppressTokensAtBeginLogitsProcessor")
    return std::make_unique<SuppressTokensAtBeginLogitsProcessor>(
        testing::ids_of(a.at("begin_suppress_tokens")), a.at("begin_index").as_int());
  if (name == "LogitNormalization") return std::make_unique<LogitNormalization>();
  if (name == "ExponentialDecayLengthPenalty") {
    const json::Value& decay = a.at("exponential_decay_length_penalty");
    return std::make_unique<ExponentialDecayLengthPenalty>(decay[0].as_int(), decay[1].as_double(),
                                                           testing::ids_of(a.at("eos_token_id")),
                                                           a.at("input_ids_seq_length").as_int());
  }
  if (name == "SequenceBiasLogitsProcessor") {
    std::vector<SequenceBiasLogitsProcessor::Bias> biases;
    for (const json::Value& pair : a.at("sequence_bias").as_array()) {
      biases.emplace_back(testing::ids_of(pair[0]), static_cast<float>(pair[1].as_double()));
    }
    return std::make_unique<SequenceBiasLogitsProcessor>(biases);
  }
  if (name == "NoBadWordsLogitsProcessor") {
    std::vector<std::vector<int64_t>> words;
    for (const json::Value& w : a.at("bad_words_ids").as_array()) words.push_back(testing::ids_of(w));
    return std::make_unique<NoBadWordsLogitsProcessor>(words, testing::ids_of(a.at("eos_token_id")));
  }
  throw Error("unknown processor " + name);
}

// Same -inf entries, and the other values equal up to float32 rounding.
void expect_scores_match(const std::vector<float>& got, const std::vector<float>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(mask(got), mask(expected));
  for (size_t i = 0; i < got.size(); ++i) {
    if (expected[i] == -kInf) continue;
    if (std::isnan(expected[i])) {  // -inf + inf, as torch computes it too
      EXPECT_TRUE(std::isnan(got[i])) << "index " << i;
      continue;
    }
    EXPECT_NEAR(got[i], expected[i], 1e-6f * std::max(1.0f, std::fabs(expected[i]))) << "index " << i;
  }
}

TEST(LogitsProcessorsVsTransformers, RecordedRows) {
  const auto refs = testing::load_refs("generation_refs.json");
  if (!refs)
    GTEST_SKIP() << "tests/generate/generation_refs.json not made yet (make_generation_refs.py, torch)";
  for (const json::Value& c : refs->at("processors").as_array()) {
    SCOPED_TRACE(c.at("name").as_string());
    const auto p = make(c.at("processor").as_string(), c.at("args"));
    expect_scores_match(apply(*p, testing::ids_of(c.at("input_ids")), testing::floats_of(c.at("scores"))),
                        testing::floats_of(c.at("expected")));
  }
  for (const json::Value& c : refs->at("processor_errors").as_array()) {
    SCOPED_TRACE(c.at("processor").as_string());
    EXPECT_EQ(error_of([&] { make(c.at("processor").as_string(), c.at("args")); }),
              c.at("error").as_string());
  }
}

}  // namespace
}  // namespace tfm

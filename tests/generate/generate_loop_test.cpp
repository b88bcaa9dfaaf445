// generate() on the parity fixtures: greedy continuations equal Transformers', in a batch of prompts of
// different lengths as well as alone; EOS stops a sequence; sampling is reproducible with a seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>

#include "support/error_of.h"
#include "support/log_capture.h"
#include "support/model_copy.h"
#include "tfm/core/error.h"
#include "tfm/core/tensor.h"
#include "tfm/generate/generate.h"
#include "tfm/io/json.h"

namespace tfm {
namespace {

using test_support::error_of;
using test_support::LogCapture;

const std::string kFixtures = std::string(TFM_SOURCE_DIR) + "/tests/fixtures/models/";

std::vector<int64_t> ints(const json::Value& v) {
  std::vector<int64_t> out;
  for (const auto& x : v.as_array()) out.push_back(x.as_int());
  return out;
}

struct Case {
  std::vector<std::vector<int64_t>> prompts, generated;
};

Case load(const std::string& model) {
  Case c;
  const json::Value ref = json::parse_file(kFixtures + model + "/reference.json");
  for (const json::Value& p : ref.at("prompts").as_array()) {
    c.prompts.push_back(ints(p.at("ids")));
    c.generated.push_back(ints(p.at("generated")));
  }
  return c;
}

json::Object kwargs(std::initializer_list<std::pair<std::string, json::Value>> items) {
  json::Value v = json::Object{};
  for (const auto& [k, x] : items) v.set(k, x);
  return v.as_object();
}

TEST(Generate, GreedyBatchOfDifferentLengthsMatchesTransformers) {
  for (const std::string name : {"qwen3_head_dim_sliding", "mistral_sliding", "llama3_rope_bias"}) {
    const Case c = load(name);
    CausalLM model = CausalLM::from_pretrained(kFixtures + name, {.dtype = "float32", .device = "cpu"});
    const GenerationConfig config = load_generation_config(kFixtures + name, model.config());
    const GenerateOutput out = generate(model, c.prompts, config, kwargs({{"max_new_tokens", 24}}));
    ASSERT_EQ(out.tokens.size(), c.prompts.size());
    for (size_t i = 0; i < c.prompts.size(); ++i) {
      EXPECT_EQ(out.tokens[i], c.generated[i]) << name << " prompt " << i;
      EXPECT_EQ(out.stop_reasons[i], StopReason::max_length);
    }
    EXPECT_EQ(out.generated_tokens, 24 * static_cast<int64_t>(c.prompts.size()));
  }
}

TEST(Generate, EosStopsOnlyItsSequence) {
  const Case c = load("llama_gqa");
  CausalLM model = CausalLM::from_pretrained(kFixtures + "llama_gqa", {.dtype = "float32", .device = "cpu"});
  // Make the 6th greedy token of the second prompt an end-of-sequence token.
  const int64_t eos = c.generated[1][5];
  const GenerateOutput out =
      generate(model, c.prompts, GenerationConfig{}, kwargs({{"max_new_tokens", 24}, {"eos_token_id", eos}}));
  for (size_t i = 0; i < c.prompts.size(); ++i) {
    const auto& ref = c.generated[i];
    const auto stop = std::find(ref.begin(), ref.end(), eos);
    const std::vector<int64_t> expected(ref.begin(), stop == ref.end() ? ref.end() : stop + 1);
    EXPECT_EQ(out.tokens[i], expected) << "prompt " << i;
    EXPECT_EQ(out.stop_reasons[i], stop == ref.end() ? StopReason::max_length : StopReason::eos);
  }
}

TEST(Generate, SamplingIsReproducibleWithASeed) {
  const Case c = load("llama_gqa");
  CausalLM model = CausalLM::from_pretrained(kFixtures + "llama_gqa", {.dtype = "float32", .device = "cpu"});
  auto run = [&](int64_t seed) {
    return generate(
               model, c.prompts, GenerationConfig{},
               kwargs({{"max_new_tokens", 16}, {"do_sample", true}, {"temperature", 1.5}, {"seed", seed}}))
        .tokens;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Generate, StreamsEveryTokenInOrder) {
  const Case c = load("llama_gqa");
  CausalLM model = CausalLM::from_pretrained(kFixtures + "llama_gqa", {.dtype = "float32", .device = "cpu"});
  std::vector<std::vector<int64_t>> streamed(c.prompts.size());
  GenerateCallbacks callbacks;
  callbacks.on_token = [&](size_t i, int64_t token) { streamed[i].push_back(token); };
  const GenerateOutput out =
      generate(model, c.prompts, GenerationConfig{}, kwargs({{"max_new_tokens", 5}}), callbacks);
  EXPECT_EQ(streamed, out.tokens);
}

// The cache grows with the sequences: a limit far beyond what is generated costs nothing up front (1e12
// tokens once overflowed into a negative block count), and a generation past the first blocks and past
// max_position_embeddings goes on, as in Transformers, with its reminder.
TEST(Generate, TheCacheGrowsWithTheSequences) {
  const Case c = load("llama_gqa");
  CausalLM model = CausalLM::from_pretrained(kFixtures + "llama_gqa", {.dtype = "float32", .device = "cpu"});
  const int64_t eos = c.generated[1][5];
  size_t most_bytes = 0;
  GenerateCallbacks callbacks;
  callbacks.on_token = [&](size_t, int64_t) { most_bytes = std::max(most_bytes, host_tensor_bytes()); };
  for (const int64_t limit : {int64_t{1000000000000}, std::numeric_limits<int64_t>::max()}) {
    const GenerateOutput out =
        generate(model, {c.prompts[1]}, GenerationConfig{},
                 kwargs({{"max_new_tokens", limit}, {"eos_token_id", eos}}), callbacks);
    EXPECT_EQ(out.tokens[0].size(), 6u);
    EXPECT_EQ(out.stop_reasons[0], StopReason::eos);
  }
  EXPECT_LT(most_bytes, size_t{16} << 20);

  LogCapture log;
  const GenerateOutput out =
      generate(model, c.prompts, GenerationConfig{}, kwargs({{"max_new_tokens", 600}}));
  for (size_t i = 0; i < c.prompts.size(); ++i) {
    ASSERT_EQ(out.tokens[i].size(), 600u);
    EXPECT_EQ(std::vector<int64_t>(out.tokens[i].begin(), out.tokens[i].begin() + 24), c.generated[i]) << i;
  }
  EXPECT_EQ(log.at(logging::Level::warning),
            std::vector<std::string>{
                "This is a friendly reminder - the current text generation call has exceeded the "
                "model's predefined maximum length (256). Depending on the model, you may "
                "observe exceptions, performance degradation, or nothing at all."});
}

// Transformers' greedy search picks a token from NaN scores all the same; tfm says why the text is nonsense.
TEST(Generate, NonFiniteLogitsAreAnError) {
  test_support::ModelCopy copy(kFixtures + "llama_gqa");
  copy.set_first_element("model.norm.weight", std::numeric_limits<float>::quiet_NaN());
  // In the file's dtype on the cpu, the norm's weight is a view of the file, not read at load.
  CausalLM model = CausalLM::from_pretrained(copy.dir(), {.dtype = "bfloat16", .device = "cpu"});
  EXPECT_EQ(
      error_of([&] {
        generate(model, {{1, 2, 3}}, GenerationConfig{}, kwargs({{"max_new_tokens", 4}}));
      }),
      "the logits of prompt 0 at generation step 1 hold NaN or infinite values: the model's weights hold "
      "such "
      "values or its computation overflows in bfloat16 (remove_invalid_values=True replaces them, as in "
      "Transformers)");
  const GenerateOutput out = generate(model, {{1, 2, 3}}, GenerationConfig{},
                                      kwargs({{"max_new_tokens", 4}, {"remove_invalid_values", true}}));
  EXPECT_EQ(out.tokens[0].size(), 4u);
}

TEST(Generate, BadPromptsAreErrors) {
  CausalLM model = CausalLM::from_pretrained(kFixtures + "llama_gqa", {.dtype = "float32", .device = "cpu"});
  EXPECT_THROW(generate(model, {{}}, GenerationConfig{}), Error);
  EXPECT_THROW(generate(model, {{1, 100000}}, GenerationConfig{}), Error);
}

}  // namespace
}  // namespace tfm

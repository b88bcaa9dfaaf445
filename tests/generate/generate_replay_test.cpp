// Replays whole generate() runs recorded from Transformers (a tiny random Llama, tests/fixtures/
// make_generation_refs.py): the recorded raw logits of each step go through tfm's config merge, length
// resolution, processor list, token choice and stopping criteria, which must give Transformers' processed
// scores, tokens and stopping step.
#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"
#include "tfm/generation/generation_config.h"
#include "tfm/generation/logits_process.h"
#include "tfm/generation/sampling.h"
#include "tfm/generation/stopping.h"

namespace tfm {
namespace {

json::Value as_list(const json::Value& v) {
  return v.is_int() ? json::Value(json::Array{v}) : v;
}

TEST(GenerateReplay, MatchesTransformersStepByStep) {
  const auto refs = testing::load_refs("generation_refs.json");
  if (!refs)
    GTEST_SKIP() << "tests/generate/generation_refs.json not made yet (make_generation_refs.py, torch)";
  for (const json::Value& c : refs->at("generate").as_array()) {
    SCOPED_TRACE(c.at("name").as_string());
    const std::vector<int64_t> prompt = testing::ids_of(c.at("prompt"));
    const PreparedGenerationConfig prepared = prepare_generation_config(
        GenerationConfig::from_json(c.at("generation_config")), c.at("kwargs").as_object());
    const LengthLimits limits = resolve_length_limits(prepared, static_cast<int64_t>(prompt.size()),
                                                      c.at("max_position_embeddings").as_int());
    EXPECT_EQ(limits.max_length, c.at("max_length").as_int());
    EXPECT_EQ(limits.min_length, c.at("min_length").as_int());

    const json::Value mine = prepared.config.to_json();
    for (const auto& [key, expected] : c.at("prepared").as_object()) {
      if (key == "max_length" || key == "min_length") continue;  // resolved per sequence, checked above
      const json::Value* got = mine.find(key);
      const bool id_list = key == "eos_token_id" || key == "forced_eos_token_id";
      EXPECT_EQ(got ? *got : json::Value(), id_list ? as_list(expected) : expected) << key;
    }

    const LogitsProcessorList processors =
        build_logits_processors(prepared.config, static_cast<int64_t>(prompt.size()), limits);
    std::vector<std::string> names;
    for (size_t i = 0; i < processors.size(); ++i) names.emplace_back(processors[i].name());
    std::vector<std::string> expected_names;
    for (const json::Value& n : c.at("processors").as_array()) expected_names.push_back(n.as_string());
    EXPECT_EQ(names, expected_names);

    const StoppingCriteria stopping(prepared.config, limits.max_length);
    const std::vector<int64_t> sequence = testing::ids_of(c.at("sequence"));
    const json::Array& logits = c.at("logits").as_array();
    const json::Array& scores = c.at("scores").as_array();
    ASSERT_EQ(logits.size(), sequence.size() - prompt.size());
    std::vector<int64_t> ids = prompt;
    for (size_t step = 0; step < logits.size(); ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      std::vector<float> row = testing::floats_of(logits[step]);
      processors(ids, row);
      const std::vector<float> expected = testing::floats_of(scores[step]);
      for (size_t i = 0; i < row.size(); ++i) {
        if (std::isinf(expected[i])) {
          EXPECT_EQ(row[i], expected[i]) << "index " << i;
        } else {
          EXPECT_NEAR(row[i], expected[i], 1e-5f * std::max(1.0f, std::fabs(expected[i]))) << "index " << i;
        }
      }
      const int64_t token = sequence[prompt.size() + step];
      if (prepared.config.do_sample == true) {
        EXPECT_TRUE(std::isfinite(row[static_cast<size_t>(token)])) << "sampled a filtered token";
      } else {
        EXPECT_EQ(argmax(row), token);
      }
      ids.push_back(token);
      const bool last = step + 1 == logits.size();
      EXPECT_EQ(stopping.check(ids) != StopReason::none, last);
    }
  }
}

}  // namespace
}  // namespace tfm

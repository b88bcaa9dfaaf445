#include "tfm/generation/generation_config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <limits>

#include "support/error_of.h"
#include "support/log_capture.h"
#include "test_util.h"
#include "tfm/core/error.h"

namespace tfm {
namespace {

using tfm::test_support::error_of;
using tfm::test_support::LogCapture;

// A field as Transformers holds it, normalised as tfm keeps it (eos_token_id and stop_strings become lists).
json::Value normalised(const std::string& key, const json::Value& v) {
  if ((key == "eos_token_id" && v.is_int()) || (key == "stop_strings" && v.is_string()))
    return json::Array{v};
  return v;
}

TEST(GenerationConfig, MatchesTransformersOnRecordedConfigs) {
  const auto refs = testing::load_refs("config_streamer_refs.json");
  ASSERT_TRUE(refs) << "tests/generate/config_streamer_refs.json is missing";
  for (const json::Value& c : refs->at("cases").as_array()) {
    SCOPED_TRACE(c.at("name").as_string());
    if (const json::Value* error = c.find("error")) {
      EXPECT_EQ(error_of([&] { GenerationConfig::from_json(c.at("input")); }), error->as_string());
      continue;
    }
    const GenerationConfig config = GenerationConfig::from_json(c.at("input"));
    const json::Value mine = config.to_json();
    for (const auto& [key, expected] : c.at("fields").as_object()) {
      const json::Value* got = mine.find(key);
      EXPECT_EQ(got ? *got : json::Value(), normalised(key, expected)) << key;
    }
    std::vector<std::string> expected_issues;
    for (const json::Value& issue : c.at("issues").as_array())
      expected_issues.push_back(issue[1].as_string());
    EXPECT_EQ(config.validate(), expected_issues);
  }
}

TEST(GenerationConfig, GlobalDefaultsAreTransformers) {
  const auto refs = testing::load_refs("config_streamer_refs.json");
  ASSERT_TRUE(refs);
  EXPECT_EQ(json::Value(GenerationConfig::global_defaults()), refs->at("global_defaults"));
}

TEST(PrepareGenerationConfig, AcceptsEveryTransformersAttributeAsAKwarg) {
  const auto refs = testing::load_refs("config_streamer_refs.json");
  ASSERT_TRUE(refs);
  for (const json::Value& name : refs->at("attributes").as_array()) {
    json::Object kwargs = {{name.as_string(), nullptr}};
    EXPECT_NO_THROW(prepare_generation_config(GenerationConfig(), kwargs)) << name.as_string();
  }
}

TEST(GenerationConfig, KeepsUnknownKeysInOrderAndWritesThemBack) {
  const json::Value in =
      json::parse(R"({"transformers_version": "4.51.0", "top_k": 20, "custom": [1, {"a": null}],
                                         "eos_token_id": 7})");
  const GenerationConfig c = GenerationConfig::from_json(in);
  ASSERT_EQ(c.other.size(), 2u);
  EXPECT_EQ(c.other[0].first, "transformers_version");
  EXPECT_EQ(c.other[1].first, "custom");
  EXPECT_EQ(json::dump_compact(c.to_json()),
            R"({"top_k":20,"eos_token_id":[7],"transformers_version":"4.51.0","custom":[1,{"a":null}]})");
}

TEST(GenerationConfig, WrongTypesNameTheKeyAndTheFile) {
  EXPECT_EQ(error_of([] { GenerationConfig::from_json(json::parse(R"({"top_k": 2.5})")); }),
            "generation config: `top_k` must be an integer, found a number");
  EXPECT_EQ(error_of([] { GenerationConfig::from_json(json::parse(R"({"eos_token_id": [1, "x"]})")); }),
            "generation config: `eos_token_id` must be an integer or a list of integers");
  EXPECT_EQ(error_of([] { GenerationConfig::from_json(json::parse("[1]")); }),
            "generation config must be a JSON object, found an array");

  const std::string path = ::testing::TempDir() + "/tfm_generation_config_bad.json";
  std::ofstream(path) << R"({"do_sample": "yes"})";
  EXPECT_EQ(error_of([&] { GenerationConfig::from_file(path); }),
            path + ": generation config: `do_sample` must be a boolean, found a string");
  std::remove(path.c_str());
  EXPECT_NE(error_of([] {
              GenerationConfig::from_file("/nonexistent/generation_config.json");
            }).find("/nonexistent/generation_config.json"),
            std::string::npos);
}

TEST(GenerationConfig, UpdateSetsUnsetsAndReportsUnusedKeys) {
  GenerationConfig c =
      GenerationConfig::from_json(json::parse(R"({"temperature": 0.6, "top_k": 20, "x": 1})"));
  const auto unused =
      c.update(json::parse(R"({"temperature": null, "top_k": 5, "x": 2, "typo_flag": 3})").as_object());
  EXPECT_EQ(unused, std::vector<std::string>{"typo_flag"});
  EXPECT_FALSE(c.temperature);
  EXPECT_EQ(c.top_k, 5);
  EXPECT_EQ(c.other[0].second, json::Value(2));

  c.update(json::parse(R"({"top_k": 9, "top_p": 0.5})").as_object(), /*defaults_only=*/true);
  EXPECT_EQ(c.top_k, 5);  // already set
  EXPECT_EQ(c.top_p, 0.5);
  EXPECT_THROW(c.update(json::parse(R"({"max_new_tokens": -1})").as_object()), Error);
}

TEST(PrepareGenerationConfig, ModelConfigThenDefaultsThenKwargs) {
  const GenerationConfig qwen3 = GenerationConfig::from_json(json::parse(
      R"({"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
          "temperature": 0.6, "top_k": 20, "top_p": 0.95})"));
  {
    LogCapture log;
    const PreparedGenerationConfig p =
        prepare_generation_config(qwen3, json::parse(R"({"max_new_tokens": 7})").as_object());
    EXPECT_EQ(p.config.do_sample, true);
    EXPECT_EQ(p.config.temperature, 0.6);
    EXPECT_EQ(p.config.top_k, 20);
    EXPECT_EQ(p.config.typical_p, 1.0);           // global default
    EXPECT_EQ(p.config.repetition_penalty, 1.0);  // global default
    EXPECT_EQ(p.config.max_length, 20);
    EXPECT_EQ(p.config.max_new_tokens, 7);
    EXPECT_FALSE(p.config.min_p);  // no default
    EXPECT_TRUE(p.has_default_max_length);
    EXPECT_TRUE(log.at(logging::Level::warning).empty());
  }
  {
    // Greedy asked by the call: the model's sampling flags are inherited, so they are not reported.
    LogCapture log;
    const PreparedGenerationConfig greedy =
        prepare_generation_config(qwen3, json::parse(R"({"do_sample": false})").as_object());
    EXPECT_EQ(greedy.config.do_sample, false);
    EXPECT_TRUE(log.at(logging::Level::warning).empty());
  }
  // ... but flags set by the call itself are: a summary at warning level, the details at info level.
  const std::string summary = "The following generation flags are not valid and may be ignored: ['top_k'].";
  {
    LogCapture log(logging::Level::warning);
    prepare_generation_config(qwen3, json::parse(R"({"do_sample": false, "top_k": 3})").as_object());
    EXPECT_EQ(log.at(logging::Level::warning),
              std::vector<std::string>{summary + " Set `TRANSFORMERS_VERBOSITY=info` for more details."});
  }
  {
    LogCapture log(logging::Level::info);
    prepare_generation_config(qwen3, json::parse(R"({"do_sample": false, "top_k": 3})").as_object());
    EXPECT_EQ(log.at(logging::Level::warning), std::vector<std::string>{summary});
    ASSERT_EQ(log.at(logging::Level::info).size(), 1u);
    EXPECT_EQ(log.at(logging::Level::info)[0].rfind(
                  "- `top_k`: `do_sample` is not set to `True`. However, `top_k` is "
                  "set to `3`",
                  0),
              0u);
  }
  {
    LogCapture log(logging::Level::error);  // what the verbosity leaves out is not logged
    prepare_generation_config(qwen3, json::parse(R"({"do_sample": false, "top_k": 4})").as_object());
    EXPECT_TRUE(log.at(logging::Level::warning).empty());
  }

  EXPECT_EQ(
      error_of([&] { prepare_generation_config(qwen3, json::parse(R"({"temprature": 0.5})").as_object()); }),
      "The following `model_kwargs` are not used by the model: ['temprature'] (note: typos in the generate "
      "arguments will also show up in this list)");
}

TEST(ResolveLengthLimits, FollowsPrepareGeneratedLength) {
  const GenerationConfig none;
  // Nothing set: 20 new tokens, capped by max_position_embeddings.
  PreparedGenerationConfig p = prepare_generation_config(none);
  {
    LogCapture log;
    EXPECT_EQ(resolve_length_limits(p, 7).max_length, 27);
    EXPECT_EQ(log.at(logging::Level::warning),
              std::vector<std::string>{
                  "Using the model-agnostic default `max_length` (=27) to control the generation "
                  "length. We recommend setting `max_new_tokens` to control the maximum length "
                  "of the generation."});
  }
  EXPECT_EQ(resolve_length_limits(p, 5, 22).max_length, 22);
  EXPECT_EQ(resolve_length_limits(p, 5).min_length, 0);

  // max_new_tokens wins over max_length, with a warning when the call prepares the config.
  {
    LogCapture log;
    p = prepare_generation_config(none,
                                  json::parse(R"({"max_new_tokens": 4, "max_length": 100})").as_object());
    ASSERT_EQ(log.at(logging::Level::warning).size(), 1u);
    EXPECT_EQ(log.at(logging::Level::warning)[0].rfind(
                  "Both `max_new_tokens` (=4) and `max_length`(=100) seem to have been set.", 0),
              0u);
  }
  EXPECT_EQ(resolve_length_limits(p, 6).max_length, 10);
  // A max_new_tokens as large as int64 holds is a limit that is never reached, not an overflow.
  p = prepare_generation_config(none, json::parse(R"({"max_new_tokens": 9223372036854775807})").as_object());
  EXPECT_EQ(resolve_length_limits(p, 6).max_length, std::numeric_limits<int64_t>::max());

  // An explicit max_length counts the prompt.
  p = prepare_generation_config(GenerationConfig::from_json(json::parse(R"({"max_length": 11})")));
  EXPECT_EQ(resolve_length_limits(p, 5).max_length, 11);
  EXPECT_EQ(resolve_length_limits(p, 5, 8).max_length, 11);  // no cap when max_length is explicit
  EXPECT_EQ(
      error_of([&] { resolve_length_limits(p, 11); }),
      "Input length of input_ids is 11, but `max_length` is set to 11. This can lead to unexpected behavior. "
      "You should consider increasing `max_length` or, better yet, setting `max_new_tokens`.");

  // min_new_tokens becomes a min_length past the prompt.
  p = prepare_generation_config(none,
                                json::parse(R"({"max_new_tokens": 3, "min_new_tokens": 5})").as_object());
  LogCapture log;
  const LengthLimits l = resolve_length_limits(p, 4);
  EXPECT_EQ(l.min_length, 9);
  EXPECT_EQ(l.max_length, 7);
  ASSERT_EQ(log.at(logging::Level::warning).size(), 2u);
  EXPECT_EQ(log.at(logging::Level::warning)[0].rfind(
                "Unfeasible length constraints: `min_length` (9) is larger than", 0),
            0u);
}

}  // namespace
}  // namespace tfm

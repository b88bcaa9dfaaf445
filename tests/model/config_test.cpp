// config.json values that would break a model (NaN logits, runaway allocations) are errors before any weight
// is read, in Transformers' words where it has them; sizes are checked against the checkpoint before anything
// is sized by them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "parity_fixtures.h"
#include "support/error_of.h"
#include "support/log_capture.h"
#include "support/model_copy.h"
#include "tfm/core/error.h"
#include "tfm/model/config.h"

namespace tfm {
namespace {

using test_support::error_of;
using test_support::LogCapture;
using test_support::ModelCopy;

json::Value llama(const json::Object& edits) {
  json::Value c = json::parse_file(parity::kFixtures + "llama_gqa/config.json");
  for (const auto& [key, value] : edits) c.set(key, value);
  return c;
}

std::string config_error(const json::Object& edits) {
  return error_of([&] { ModelConfig::from_json(llama(edits)); });
}

json::Value rope(const std::string& json_text) {
  return json::parse(json_text);
}

TEST(ModelConfig, ValuesThatMakeNaNAreErrors) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(config_error({{"rms_norm_eps", -1e-6}}),
            "config.json: rms_norm_eps must be a non-negative number, got -1e-06");
  EXPECT_EQ(config_error({{"rms_norm_eps", nan}}),
            "config.json: rms_norm_eps must be a non-negative number, got nan");
  EXPECT_EQ(config_error({{"rope_parameters", rope(R"({"rope_type": "linear", "factor": 0.0})")}}),
            "config.json: `rope_parameters`'s factor field must be a float or int >= 1, got 0.0");
  EXPECT_EQ(config_error({{"rope_parameters", rope(R"({"rope_type": "dynamic", "factor": NaN})")}}),
            "config.json: `rope_parameters`'s factor field must be a float or int >= 1, got nan");
  EXPECT_EQ(config_error({{"rope_parameters", rope(R"({"rope_type": "default", "rope_theta": NaN})")}}),
            "config.json: rope_theta must be a positive number, got nan");
  EXPECT_EQ(
      config_error({{"rope_parameters", rope(R"({"rope_type": "llama3", "factor": 8.0,
                            "low_freq_factor": 4.0, "high_freq_factor": 4.0})")}}),
      "config.json: `rope_parameters`'s high_freq_factor field must be greater than low_freq_factor, got "
      "high_freq_factor=4.0 and low_freq_factor=4.0");
}

TEST(ModelConfig, LlamaHeadsMustDivideTheHiddenSize) {
  EXPECT_EQ(config_error({{"num_attention_heads", 3}, {"num_key_value_heads", 1}}),
            "config.json: The hidden size (64) is not a multiple of the number of attention heads (3).");
}

TEST(ModelConfig, RopeTypesNeedTheirKeysAsInTransformers) {
  EXPECT_EQ(config_error({{"rope_parameters", rope(R"({"rope_type": "yarn"})")}}),
            "config.json: Missing required keys in `rope_parameters` for 'rope_type'='yarn': {'factor'}");
  EXPECT_EQ(config_error({{"rope_parameters", rope(R"({"rope_type": "linear", "factor": null})")}}),
            "config.json: Missing required keys in `rope_parameters` for 'rope_type'='linear': {'factor'}");
  EXPECT_EQ(config_error({{"rope_parameters", rope(R"({"rope_type": "llama3", "factor": 8.0})")}}),
            "config.json: Missing required keys in `rope_parameters` for 'rope_type'='llama3': "
            "{'high_freq_factor', "
            "'low_freq_factor'}");
  // A factor below 1 compresses positions: Transformers warns, and so does tfm.
  LogCapture log;
  const ModelConfig c =
      ModelConfig::from_json(llama({{"rope_parameters", rope(R"({"rope_type": "linear", "factor": 0.5})")}}));
  EXPECT_EQ(c.rope.factor, 0.5);
  EXPECT_EQ(log.at(logging::Level::warning),
            std::vector<std::string>{
                "config.json: `rope_parameters`'s factor field must be a float or int >= 1, got 0.5"});
}

// Reading a config allocates nothing per layer: the layer count is a claim until the checkpoint confirms it.
TEST(ModelConfig, HugeSizesAreReadWithoutAllocating) {
  const ModelConfig c = ModelConfig::from_json(
      llama({{"num_hidden_layers", int64_t{1} << 50}, {"max_position_embeddings", int64_t{1} << 60}}));
  EXPECT_EQ(c.num_hidden_layers, int64_t{1} << 50);
  EXPECT_EQ(c.window_of((int64_t{1} << 50) - 1), 0);
}

std::string load_error(const ModelCopy& copy, const std::string& dtype = "float32") {
  return error_of([&] { CausalLM::from_pretrained(copy.dir(), {.dtype = dtype}); });
}

TEST(ModelLoad, SizesAreCheckedAgainstTheCheckpointBeforeAnythingIsSizedByThem) {
  ModelCopy layers(parity::kFixtures + "llama_gqa");
  layers.edit_config({{"num_hidden_layers", int64_t{1000000000000}}});
  EXPECT_EQ(load_error(layers), layers.dir() +
                                    ": config.json has num_hidden_layers 1000000000000, but the "
                                    "checkpoint holds layers 0 to 1");
  ModelCopy heads(parity::kFixtures + "qwen3_head_dim_sliding");
  heads.edit_config({{"num_attention_heads", int64_t{1} << 61}, {"num_key_value_heads", int64_t{1} << 61}});
  EXPECT_EQ(load_error(heads),
            "config.json: num_attention_heads * head_dim (2305843009213693952 * 32) does not "
            "fit in 64 bits");
  ModelCopy vocab(parity::kFixtures + "llama_gqa");
  vocab.edit_config({{"vocab_size", int64_t{1} << 40}});
  EXPECT_NE(load_error(vocab).find("model.embed_tokens.weight has shape [320, 64] but config.json implies "
                                   "[1099511627776, 64]"),
            std::string::npos);
}

TEST(ModelLoad, AnIntegerDtypeIsRefusedInTransformersWords) {
  ModelCopy copy(parity::kFixtures + "llama_gqa");
  copy.edit_config({{"dtype", "int32"}});
  EXPECT_EQ(
      load_error(copy, "auto"),
      "LlamaForCausalLM cannot be instantiated under `dtype=torch.int32` as it's not a floating-point dtype");
}

// Weights tfm reads or converts at load are checked as they pass; NaN in them would make every logit NaN.
TEST(ModelLoad, NonFiniteWeightsAreErrorsNamingTheTensor) {
  ModelCopy copy(parity::kFixtures + "llama_gqa");
  copy.set_first_element("model.layers.1.mlp.down_proj.weight", std::numeric_limits<float>::quiet_NaN());
  const std::string file = copy.dir() + "/model.safetensors";
  EXPECT_EQ(load_error(copy, "float32"),
            file + ": tensor model.layers.1.mlp.down_proj.weight holds NaN or infinite values as float32");
  // In the file's dtype on the cpu a single tensor is a view of the mapping, not read at load; q/k/v are
  // stacked into one, so they are read.
  EXPECT_EQ(load_error(copy, "bfloat16"), "(no error)");
  copy.set_first_element("model.layers.0.self_attn.k_proj.weight", std::numeric_limits<float>::infinity());
  EXPECT_EQ(load_error(copy, "bfloat16"),
            file + ": tensor model.layers.0.self_attn.k_proj.weight holds NaN or infinite values");
}

}  // namespace
}  // namespace tfm

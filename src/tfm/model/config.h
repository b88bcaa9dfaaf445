// config.json of the decoder-only family tfm runs (Llama, Mistral, Qwen2, Qwen3), read as Transformers reads
// it: the Hub's v4-style fields (rope_theta, rope_scaling, torch_dtype) and the v5-style ones
// (rope_parameters, dtype, layer_types), with each architecture's defaults for absent fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tfm/core/dtype.h"
#include "tfm/io/json.h"

namespace tfm {

enum class Architecture { llama, mistral, qwen2, qwen3 };

struct RopeParameters {
  std::string rope_type = "default";  // default, linear, dynamic, llama3, yarn
  double rope_theta = 10000.0;
  double partial_rotary_factor = 1.0;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // llama3 and yarn
  int64_t original_max_position_embeddings = 0;
  // yarn
  std::optional<double> attention_factor;
  std::optional<double> beta_fast;
  std::optional<double> beta_slow;
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  bool truncate = true;
};

struct ModelConfig {
  Architecture architecture = Architecture::llama;
  std::string architecture_name;  // "Qwen3ForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  std::string hidden_act = "silu";
  bool qkv_bias = false;  // bias on q_proj, k_proj, v_proj
  bool o_bias = false;    // bias on o_proj
  bool mlp_bias = false;  // bias on gate_proj, up_proj, down_proj
  bool qk_norm = false;   // Qwen3: RMSNorm over head_dim on q and k before RoPE
  bool tie_word_embeddings = false;
  RopeParameters rope;
  // Sliding-window attention (a token sees itself and the window-1 before it): the window, 0 when no layer
  // slides; which layers slide is layer_types' list when config.json has one, else every layer from
  // first_sliding_layer on. Nothing here is sized by num_hidden_layers, which the checkpoint has yet to
  // confirm.
  int64_t sliding_window = 0;
  int64_t first_sliding_layer = 0;
  std::vector<bool> sliding_layers;
  // The window of one layer, 0 for full attention.
  int64_t window_of(int64_t layer) const;
  std::optional<DType> dtype;  // config's dtype / torch_dtype, what dtype="auto" means
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_id;
  std::optional<int64_t> pad_token_id;

  // `source` names the file in error messages.
  static ModelConfig from_json(const json::Value& config, const std::string& source = "config.json");
  static ModelConfig from_file(const std::string& path);
};

}  // namespace tfm

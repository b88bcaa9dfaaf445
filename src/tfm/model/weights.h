// The tensors a checkpoint of each architecture holds, by their Hub names, and loading them for a device.
#pragma once

#include <string>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/model/config.h"

namespace tfm {

struct WeightSpec {
  std::string name;  // "model.layers.0.self_attn.q_proj.weight"
  Shape shape;
};

// Every tensor config.json implies, in the order Transformers' state_dict lists them (lm_head absent when
// tied).
std::vector<WeightSpec> expected_weights(const ModelConfig& config);

// One decoder layer's weights, with q/k/v and gate/up fused so each is one matmul.
struct LayerWeights {
  Tensor input_layernorm;             // (H)
  Tensor qkv_proj, qkv_bias;          // ((heads + 2 kv_heads) * head_dim, H), bias or undefined
  Tensor q_norm, k_norm;              // (head_dim), Qwen3 only
  Tensor o_proj, o_bias;              // (H, heads * head_dim)
  Tensor post_attention_layernorm;    // (H)
  Tensor gate_up_proj, gate_up_bias;  // (2 I, H)
  Tensor down_proj, down_bias;        // (H, I)
};

struct ModelWeights {
  Tensor embed_tokens;  // (V, H)
  std::vector<LayerWeights> layers;
  Tensor norm;     // (H)
  Tensor lm_head;  // (V, H), the embedding itself when tied
};

// Reads the safetensors checkpoint in `dir`, checks it against the config (missing, unexpected and misshapen
// tensors are errors naming the file and tensor), and returns float32 weights whose values are rounded to
// `dtype` (the precision the model runs at), placed on `device`.
ModelWeights load_weights(const std::string& dir, const ModelConfig& config, DType dtype, Device device);

}  // namespace tfm

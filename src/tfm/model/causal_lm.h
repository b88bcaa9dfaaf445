// A decoder-only causal language model (Llama, Mistral, Qwen2, Qwen3): config, weights and the forward pass
// over a ragged batch with a paged KV cache.
#pragma once

#include <string>

#include "tfm/core/device.h"
#include "tfm/model/batch.h"
#include "tfm/model/config.h"
#include "tfm/model/kv_cache.h"
#include "tfm/model/rope.h"
#include "tfm/model/weights.h"
#include "tfm/ops/ops.h"

namespace tfm {

struct LoadOptions {
  std::string dtype = "auto";                // "auto" (config.json's dtype), "float32", "bfloat16", "float16"
  std::string device = "cpu";                // resolved by resolve_device: "auto", "cpu", "cuda:0", ...
  std::string attn_implementation = "sdpa";  // "eager" or "sdpa"
};

class CausalLM {
 public:
  // `dir` is a model folder as the Hub ships it.
  static CausalLM from_pretrained(const std::string& dir, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  Device device() const { return device_; }
  DType dtype() const { return dtype_; }

  // A cache of `num_blocks` blocks of `block_size` tokens on the model's device.
  KVCache make_cache(int64_t num_blocks, int64_t block_size = kDefaultBlockSize) const;
  static constexpr int64_t kDefaultBlockSize = 16;

  // Runs one step and returns the float32 logits (R, vocab) of batch.logits_rows, on the host.
  Tensor forward(const ForwardBatch& batch, KVCache& cache);

 private:
  CausalLM(ModelConfig config, ModelWeights weights, DType dtype, Device device,
           ops::AttentionImpl attention);

  ModelConfig config_;
  ModelWeights weights_;
  DType dtype_;
  Device device_;
  ops::AttentionImpl attention_;
  RotaryEmbedding rope_;
};

}  // namespace tfm

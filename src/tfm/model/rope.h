// Rotary position embedding tables as Transformers computes them (modeling_rope_utils.py): the inverse
// frequencies of each rope_type, the attention scaling, and dynamic NTK's update as the sequence grows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/model/config.h"

namespace tfm {

class RotaryEmbedding {
 public:
  explicit RotaryEmbedding(const ModelConfig& config);

  int64_t rot_dim() const { return rot_dim_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  float attention_scaling() const { return attention_scaling_; }
  // Whether the frequencies change with the sequence length (dynamic NTK); otherwise a position's cos and sin
  // never change, and one table serves every step.
  bool dynamic() const { return config_.rope.rope_type == "dynamic"; }

  // cos and sin (T, rot_dim) for the positions of one forward step. For dynamic RoPE this first updates the
  // frequencies from the largest position, as Transformers does before every forward (so the state carries
  // from step to step).
  void tables(std::span<const int32_t> positions, Tensor& cos, Tensor& sin);

 private:
  void compute(int64_t seq_len);  // seq_len < 0: the frequencies at load time

  const ModelConfig config_;
  int64_t rot_dim_;
  std::vector<float> inv_freq_;
  float attention_scaling_ = 1.f;
  int64_t max_seq_len_cached_;
  int64_t original_max_seq_len_;
};

}  // namespace tfm

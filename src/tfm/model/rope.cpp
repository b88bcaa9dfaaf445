#include "tfm/model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tfm/core/error.h"

namespace tfm {
namespace {

// Transformers computes these in float32 tensors; doing the same keeps the tables bit-close to its own.
std::vector<float> default_inv_freq(float base, int64_t dim) {
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    inv[i] = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
  }
  return inv;
}

float yarn_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0f : static_cast<float>(0.1 * mscale * std::log(scale) + 1.0);
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(const ModelConfig& config)
    : config_(config),
      rot_dim_(
          static_cast<int64_t>(static_cast<double>(config.head_dim) * config.rope.partial_rotary_factor)),
      max_seq_len_cached_(config.max_position_embeddings),
      original_max_seq_len_(config.max_position_embeddings) {
  compute(-1);
}

void RotaryEmbedding::compute(int64_t seq_len) {
  const RopeParameters& p = config_.rope;
  const int64_t dim = rot_dim_;
  const float base = static_cast<float>(p.rope_theta);
  attention_scaling_ = 1.f;
  if (p.rope_type == "default") {
    inv_freq_ = default_inv_freq(base, dim);
  } else if (p.rope_type == "linear") {
    inv_freq_ = default_inv_freq(base, dim);
    for (float& f : inv_freq_) f /= static_cast<float>(p.factor);
  } else if (p.rope_type == "dynamic") {
    const double max_pos = static_cast<double>(config_.max_position_embeddings);
    if (seq_len < 0) {  // at load time the sequence length is the maximum, and the base is unchanged
      inv_freq_ = default_inv_freq(base, dim);
    } else {
      const float len = static_cast<float>(std::max<double>(static_cast<double>(seq_len), max_pos));
      const float f = static_cast<float>(p.factor);
      const float grown =
          std::pow(f * len / static_cast<float>(max_pos) - (f - 1.f),
                   static_cast<float>(static_cast<double>(dim) / static_cast<double>(dim - 2)));
      inv_freq_ = default_inv_freq(base * grown, dim);
    }
  } else if (p.rope_type == "llama3") {
    inv_freq_ = default_inv_freq(base, dim);
    const float factor = static_cast<float>(p.factor);
    const float low = static_cast<float>(p.low_freq_factor), high = static_cast<float>(p.high_freq_factor);
    const float old_len = static_cast<float>(p.original_max_position_embeddings);
    const float low_wavelen = old_len / low, high_wavelen = old_len / high;
    for (float& f : inv_freq_) {
      const float wavelen = 2.f * std::numbers::pi_v<float> / f;
      const float scaled = wavelen > low_wavelen ? f / factor : f;
      if (wavelen < high_wavelen || wavelen > low_wavelen) {
        f = scaled;
      } else {
        const float smooth = (old_len / wavelen - low) / (high - low);
        f = (1.f - smooth) * scaled / factor + smooth * scaled;
      }
    }
  } else if (p.rope_type == "yarn") {
    const double factor = p.factor;
    if (p.attention_factor) {
      attention_scaling_ = static_cast<float>(*p.attention_factor);
    } else if (p.mscale && p.mscale_all_dim && *p.mscale != 0 && *p.mscale_all_dim != 0) {
      attention_scaling_ = yarn_mscale(factor, *p.mscale) / yarn_mscale(factor, *p.mscale_all_dim);
    } else {
      attention_scaling_ = yarn_mscale(factor, 1.0);
    }
    const double beta_fast = p.beta_fast && *p.beta_fast != 0 ? *p.beta_fast : 32.0;
    const double beta_slow = p.beta_slow && *p.beta_slow != 0 ? *p.beta_slow : 1.0;
    const double orig = static_cast<double>(p.original_max_position_embeddings);
    auto correction_dim = [&](double rotations) {
      return static_cast<double>(dim) * std::log(orig / (rotations * 2 * std::numbers::pi)) /
             (2 * std::log(p.rope_theta));
    };
    double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
    if (p.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;  // as Transformers does, to avoid dividing by zero
    inv_freq_.resize(static_cast<size_t>(dim / 2));
    for (int64_t i = 0; i < dim / 2; ++i) {
      const float pos_freq = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
      const float extrapolation = 1.f / pos_freq;
      const float interpolation = 1.f / (static_cast<float>(factor) * pos_freq);
      const float ramp = std::clamp(
          (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.f, 1.f);
      const float extrapolation_factor = 1.f - ramp;
      inv_freq_[i] = interpolation * (1.f - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
  } else {
    throw_error("rope_type '", p.rope_type, "' is not supported");
  }
}

void RotaryEmbedding::tables(std::span<const int32_t> positions, Tensor& cos, Tensor& sin) {
  const int64_t T = static_cast<int64_t>(positions.size());
  if (dynamic() && T > 0) {
    const int64_t seq_len = *std::max_element(positions.begin(), positions.end()) + 1;
    if (seq_len > max_seq_len_cached_) {  // growth
      compute(seq_len);
      max_seq_len_cached_ = seq_len;
    }
    if (seq_len < original_max_seq_len_ &&
        max_seq_len_cached_ > original_max_seq_len_) {  // back to the original
      compute(-1);
      max_seq_len_cached_ = original_max_seq_len_;
    }
  }
  const int64_t half = rot_dim_ / 2;
  cos = Tensor::cpu({T, rot_dim_}, DType::float32);
  sin = Tensor::cpu({T, rot_dim_}, DType::float32);
  for (int64_t t = 0; t < T; ++t) {
    const float pos = static_cast<float>(positions[t]);
    float* c = cos.data<float>() + t * rot_dim_;
    float* s = sin.data<float>() + t * rot_dim_;
    for (int64_t i = 0; i < half; ++i) {
      const float angle = inv_freq_[i] * pos;
      c[i] = c[i + half] = std::cos(angle) * attention_scaling_;
      s[i] = s[i + half] = std::sin(angle) * attention_scaling_;
    }
  }
}

}  // namespace tfm

// One row's or head's arithmetic that several CPU kernels share (a fused kernel computes what its parts do,
// with their roundings, so that it is their reference as well as theirs on the CPU).
#pragma once

#include <cmath>
#include <cstdint>

#include "tfm/core/floats.h"

namespace tfm::cpu {

// One row of RMSNorm: n = x * rsqrt(mean(x^2) + eps) rounded to T, out = weight * n.
template <typename T>
void rms_norm_row(const T* x, const T* weight, int64_t dim, float eps, T* out) {
  float sum = 0.f;
  for (int64_t i = 0; i < dim; ++i) {
    const float v = to_float(x[i]);
    sum += v * v;
  }
  const float inv = 1.f / std::sqrt(sum / static_cast<float>(dim) + eps);
  for (int64_t i = 0; i < dim; ++i)
    out[i] = from_float<T>(to_float(weight[i]) * round_to<T>(to_float(x[i]) * inv));
}

// One row of RMSNorm's backward (op::RmsNormBackward): dx (or with `accumulate`, dx +=) from the row's input
// x and dout (dx may be dout where it is not accumulated into), and the row's terms of dweight added to
// dweight_sums where it is not null.
template <typename T>
void rms_norm_backward_row(const T* x, const T* weight, const T* dout, int64_t dim, float eps, T* dx,
                           float* dweight_sums, bool accumulate = false) {
  float sum = 0.f;
  for (int64_t i = 0; i < dim; ++i) sum += to_float(x[i]) * to_float(x[i]);
  const float inv = 1.f / std::sqrt(sum / static_cast<float>(dim) + eps);
  float dot = 0.f;  // of dn = dout * weight and n
  for (int64_t i = 0; i < dim; ++i) {
    const float n = to_float(x[i]) * inv;
    dot += to_float(dout[i]) * to_float(weight[i]) * n;
    if (dweight_sums) dweight_sums[i] += to_float(dout[i]) * round_to<T>(n);
  }
  if (!dx) return;
  const float mean = dot / static_cast<float>(dim);
  for (int64_t i = 0; i < dim; ++i) {
    const float grad = (to_float(dout[i]) * to_float(weight[i]) - to_float(x[i]) * inv * mean) * inv;
    dx[i] = from_float<T>(accumulate ? to_float(dx[i]) + round_to<T>(grad) : grad);
  }
}

// One head rotated in place by one row of cos and sin (rot of them).
template <typename T>
void rope_head(T* v, const T* c, const T* s, int64_t rot) {
  const int64_t half = rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = to_float(v[i]), x2 = to_float(v[i + half]);
    v[i] = from_float<T>(round_to<T>(x1 * to_float(c[i])) + round_to<T>(-x2 * to_float(s[i])));
    v[i + half] =
        from_float<T>(round_to<T>(x2 * to_float(c[i + half])) + round_to<T>(x1 * to_float(s[i + half])));
  }
}

}  // namespace tfm::cpu

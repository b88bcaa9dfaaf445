// op::Linear as oneDNN's matmul sees it, for the backends that run it there (cpu, xpu): x (M, K) and y (M, N)
// row-major, w (N, K) row-major read as the (K, N) weights (tag ba), bias (1, N); all in the op's dtype. The
// cpu's linear backward takes the other layouts of the same product: x stored transposed ((K, M), x_t) and w
// row-major as (K, N) (w_t false).
#pragma once

#include <cstdint>

#include <oneapi/dnnl/dnnl.hpp>

#include "tfm/core/dtype.h"

namespace tfm {

// A compute dtype (float32, bfloat16, float16) as oneDNN names it.
inline dnnl::memory::data_type onednn_type(DType d) {
  using dt = dnnl::memory::data_type;
  return d == DType::float32 ? dt::f32 : d == DType::bfloat16 ? dt::bf16 : dt::f16;
}

struct LinearDescs {
  LinearDescs(DType dtype, int64_t M, int64_t K, int64_t N, bool x_t = false, bool w_t = true)
      : x({M, K}, onednn_type(dtype), x_t ? dnnl::memory::format_tag::ba : dnnl::memory::format_tag::ab),
        w({K, N}, onednn_type(dtype), w_t ? dnnl::memory::format_tag::ba : dnnl::memory::format_tag::ab),
        bias({1, N}, onednn_type(dtype), dnnl::memory::format_tag::ab),
        y({M, N}, onednn_type(dtype), dnnl::memory::format_tag::ab) {}

  // The matmul y = x @ w (+ bias when `with_bias`).
  dnnl::matmul::desc matmul(bool with_bias) const {
    return with_bias ? dnnl::matmul::desc(x, w, bias, y) : dnnl::matmul::desc(x, w, y);
  }

  dnnl::memory::desc x, w, bias, y;
};

}  // namespace tfm

// CUDA kernels and their launchers, on raw float32 device buffers (same shapes and rules as
// backend/cpu/kernels.h). This header stays within what nvcc's C++17 accepts; the C++20 host code that
// implements OpKernels calls these. Every launcher checks the launch and throws tfm::Error on failure
// (through the status it returns: the message names the kernel).
#pragma once

#include <cstdint>

#include "tfm/backend/paged_attention_args.h"

namespace tfm::cuda {

// Returns an empty string on success, else the kernel's name and CUDA's error.
using Status = const char*;

Status embedding(const float* table, const int32_t* ids, int64_t T, int64_t H, float* out);
Status add_bias_rows(float* y, const float* bias, int64_t M, int64_t N);  // y[m, :] += bias
Status rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out);
Status rope(float* x, const float* cos, const float* sin, int64_t T, int64_t heads, int64_t head_dim,
            int64_t rot_dim);
Status silu_mul(const float* gate_up, int64_t T, int64_t I, float* out);
Status add_inplace(float* x, const float* y, int64_t n);
// Up to 4 outputs.
Status split_columns(const float* x, int64_t T, float* const* outs, const int64_t* widths, int64_t n);
Status gather_rows(const float* x, int64_t H, const int32_t* rows, int64_t R, float* out);
Status kv_cache_write(const float* k, const float* v, const int32_t* slots, int64_t T, int64_t kv_dim,
                      float* cache_k, float* cache_v);

Status paged_attention(const PagedAttentionArgs& a, bool materialize_scores);

}  // namespace tfm::cuda

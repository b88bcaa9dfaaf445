// CPU kernels: plain C++ over raw float32 buffers, parallel with OpenMP; matmul through oneDNN.
// Shapes are in the comments of each function; every buffer is contiguous and row-major. Outputs are written
// with `=` unless the name says accumulate.
#pragma once

#include <cstdint>

#include "tfm/backend/paged_attention_args.h"

namespace tfm::cpu {

// out[t, :] = table[ids[t], :]            table (V, H), ids (T), out (T, H)
void embedding(const float* table, const int32_t* ids, int64_t T, int64_t H, float* out);

// y = x @ w^T (+ bias)                    x (M, K), w (N, K), bias (N) or null, y (M, N)
void linear(const float* x, const float* w, const float* bias, int64_t M, int64_t K, int64_t N, float* y);

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight      x, out (rows, dim), weight (dim)
void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out);

// Rotary embedding in place, the half-split layout: for each of `heads` vectors of a token, the first
// rot_dim elements are rotated by (cos, sin) of that token; the rest pass through.
// x (T, heads, head_dim), cos and sin (T, rot_dim)
void rope(float* x, const float* cos, const float* sin, int64_t T, int64_t heads, int64_t head_dim,
          int64_t rot_dim);

// out = silu(gate_up[:, :I]) * gate_up[:, I:]     gate_up (T, 2I), out (T, I)
void silu_mul(const float* gate_up, int64_t T, int64_t I, float* out);

// x += y                                   (n)
void add_inplace(float* x, const float* y, int64_t n);

// Column blocks of x, side by side, copied apart: x (T, sum widths), outs[i] (T, widths[i])
void split_columns(const float* x, int64_t T, float* const* outs, const int64_t* widths, int64_t n);

// out[i, :] = x[rows[i], :]               x (?, H), rows (R), out (R, H)
void gather_rows(const float* x, int64_t H, const int32_t* rows, int64_t R, float* out);

// Writes the new keys and values into the paged cache: token t goes to cache slot slots[t]
// (block = slot / block_size, offset = slot % block_size).
// k, v (T, kv_heads * head_dim), cache_k, cache_v (blocks, block_size, kv_heads * head_dim)
void kv_cache_write(const float* k, const float* v, const int32_t* slots, int64_t T, int64_t kv_dim,
                    float* cache_k, float* cache_v);

// Causal grouped-query attention over a paged cache. `materialize_scores` selects the eager form (all scores
// of a row, then a float32 softmax) instead of one pass with a running maximum (the fused form).
void paged_attention(const PagedAttentionArgs& a, bool materialize_scores);

}  // namespace tfm::cpu

// The op set the models use. Each op checks shapes and dtypes, then runs the kernel of the tensors' device.
// Tensors are contiguous; activations are float32. Outputs are written, never accumulated, unless the name
// says so (add_).
#pragma once

#include <cstdint>
#include <span>

#include "tfm/core/tensor.h"

namespace tfm::ops {

// out = table[ids]                        table (V, H), ids int32 (T), out (T, H)
void embedding(const Tensor& table, const Tensor& ids, Tensor& out);
// y = x @ w^T + bias                      x (M, K), w (N, K), bias (N) or undefined, y (M, N)
void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y);
// RMSNorm over the last dimension         x, out (..., D), weight (D)
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out);
// Rotary embedding in place               x (T, heads, head_dim), cos and sin (T, rot_dim)
void rope_(Tensor& x, const Tensor& cos, const Tensor& sin);
// out = silu(gate) * up                   gate_up (T, 2I) as [gate | up], out (T, I)
void silu_mul(const Tensor& gate_up, Tensor& out);
// x += y                                  same shapes
void add_(Tensor& x, const Tensor& y);
// Splits the columns of x (T, sum of widths) into the outputs, in order; each output is (T, ...) of its width.
void split_columns(const Tensor& x, std::span<Tensor* const> outs);
// out[i] = x[rows[i]]                     x (T, H), out (R, H)
void gather_rows(const Tensor& x, std::span<const int32_t> rows, Tensor& out);

// The KV cache of one layer: (blocks, block_size, kv_heads, head_dim) for keys and for values.
struct LayerCache {
  Tensor key;
  Tensor value;
};

// Where each sequence's rows and cache blocks are, for one forward step (host data).
struct AttentionMetadata {
  std::span<const int32_t> query_start;   // (S + 1)
  std::span<const int32_t> context_lens;  // (S): cached tokens after this step
  std::span<const int32_t> block_tables;  // (S, max_blocks)
  int64_t max_blocks = 0;
  std::span<const int32_t> positions;     // (T)
  std::span<const int32_t> slots;         // (T): cache slot of each new token
};

enum class AttentionImpl { eager, sdpa };

// Stores this step's keys and values        k, v (T, kv_heads, head_dim)
void kv_cache_write(const Tensor& k, const Tensor& v, const AttentionMetadata& meta, LayerCache& cache);
// Causal grouped-query attention            q, out (T, heads, head_dim); window 0 means full attention
void paged_attention(const Tensor& q, const LayerCache& cache, const AttentionMetadata& meta, float scale,
                     int64_t window, AttentionImpl impl, Tensor& out);

}  // namespace tfm::ops

// The kernels of the op set on one device kind. ops/ checks shapes and dtypes, then calls the kernels of the
// tensors' device; each backend implements them for its own memory. Tensors are contiguous, float32 unless
// named otherwise (ids, rows and metadata are int32), and all on the backend's device. Outputs are written
// with `=`; names ending in an underscore update in place.
#pragma once

#include <span>

#include "tfm/core/tensor.h"

namespace tfm {

// Where each sequence's query rows and cache blocks are, for one forward step; on the device.
struct AttentionMetadata {
  Tensor query_start;   // (S + 1): rows of sequence s are [query_start[s], query_start[s + 1])
  Tensor context_lens;  // (S): tokens of sequence s in the cache, this step's included
  Tensor block_tables;  // (S, max_blocks): cache block of every block_size tokens of sequence s
  Tensor positions;     // (T): position of each row in its sequence
  Tensor slots;         // (T): cache slot of each row (block * block_size + offset)
  int64_t max_context_len = 0;
};

class OpKernels {
 public:
  virtual ~OpKernels() = default;
  // out[t] = table[ids[t]]                  table (V, H), ids (T), out (T, H)
  virtual void embedding(const Tensor& table, const Tensor& ids, Tensor& out) = 0;
  // y = x @ w^T + bias                      x (M, K), w (N, K), bias (N) or undefined, y (M, N)
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) = 0;
  // RMSNorm over the last dimension         x, out (rows, D), weight (D); out may be x
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) = 0;
  // Rotary embedding, half-split layout     x (T, heads, head_dim), cos and sin (T, rot_dim)
  virtual void rope_(Tensor& x, const Tensor& cos, const Tensor& sin) = 0;
  // out = silu(gate) * up                   gate_up (T, 2I) as [gate | up], out (T, I)
  virtual void silu_mul(const Tensor& gate_up, Tensor& out) = 0;
  // x += y
  virtual void add_(Tensor& x, const Tensor& y) = 0;
  // Column blocks of x side by side, copied apart: x (T, sum of widths), outs[i] (T, width i)
  virtual void split_columns(const Tensor& x, std::span<Tensor* const> outs) = 0;
  // out[i] = x[rows[i]]                     x (T, H), rows (R), out (R, H)
  virtual void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) = 0;
  // cache[slots[t]] = k[t], v[t]            k, v (T, kv_heads, D), caches (blocks, block_size, kv_heads, D)
  virtual void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& cache_k,
                              Tensor& cache_v) = 0;
  // Causal grouped-query attention over the paged cache; window 0 is full attention, else a row sees its own
  // position and the window-1 before it. `materialize_scores` asks for the eager form (every score of a row,
  // then a float32 softmax) rather than one pass with a running maximum.
  //                                         q, out (T, heads, D)
  virtual void paged_attention(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v,
                               const AttentionMetadata& meta, float scale, int64_t window,
                               bool materialize_scores, Tensor& out) = 0;
};

}  // namespace tfm

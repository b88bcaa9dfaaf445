// The op set: each op's arguments, declared once, as one struct. ops/ checks them and dispatches them
// through the kernel registry; each backend registers kernels for the ops, device kinds and dtypes it runs.
//
// Tensors are contiguous and on one device. Float tensors share the op's dtype (`dtype()`: float32, bfloat16 or
// float16) unless a field says otherwise; ids, rows and metadata are int32. Kernels compute in float32 and
// round to the dtype where torch rounds: once per op, or at the intermediate step torch stores in the tensor's
// dtype, as each op says. Outputs are written with `=`; an op whose name ends in an underscore updates in place.
//
// `layer` names the kind of layer an op serves (KernelConfig's keys, as Transformers names them), or is empty
// for plumbing ops no layer owns.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <tuple>

#include "tfm/core/tensor.h"

namespace tfm::op {

// An op's tensors, for the checks every op gets (one device, contiguous).
template <typename... T>
auto tensor_list(const T&... t) {
  return std::array<const Tensor*, sizeof...(T)>{&t...};
}

// out[t] = table[ids[t]]                      table (V, H), ids (T), out (T, H)
struct Embedding {
  static constexpr std::string_view name = "embedding", layer = "Embedding";
  const Tensor& table;
  const Tensor& ids;
  Tensor& out;
  DType dtype() const { return table.dtype(); }
  auto tensors() const { return tensor_list(table, ids, out); }
};

// y = x @ w^T + bias, the bias added before the one rounding      x (M, K), w (N, K), bias (N) or undefined,
//                                                                  y (M, N)
struct Linear {
  static constexpr std::string_view name = "linear", layer = "Linear";
  const Tensor& x;
  const Tensor& w;
  const Tensor& bias;
  Tensor& y;
  DType dtype() const { return x.dtype(); }
  auto tensors() const { return tensor_list(x, w, bias, y); }
};

// RMSNorm over the last dimension as Transformers' LlamaRMSNorm: n = x / sqrt(mean(x^2) + eps) rounded to the
// dtype, then out = weight * n.                                x, out (rows, D) or (T, heads, D), weight (D);
//                                                              out may be x
struct RmsNorm {
  static constexpr std::string_view name = "rms_norm", layer = "RMSNorm";
  const Tensor& x;
  const Tensor& weight;
  float eps;
  Tensor& out;
  DType dtype() const { return x.dtype(); }
  auto tensors() const { return tensor_list(x, weight, out); }
};

// The residual add of a decoder layer and the RMSNorm after it: residual += x (rounded), then
// out = rms_norm(residual).                                    residual, x, out (rows, D), weight (D)
struct AddRmsNorm {
  static constexpr std::string_view name = "add_rms_norm", layer = "RMSNorm";
  Tensor& residual;
  const Tensor& x;
  const Tensor& weight;
  float eps;
  Tensor& out;
  DType dtype() const { return residual.dtype(); }
  auto tensors() const { return tensor_list(residual, x, weight, out); }
};

// Rotary embedding in place, half-split layout: for each head of token t, x[i] and x[i + rot/2] (i < rot/2)
// become x[i] cos - x[i + rot/2] sin and x[i + rot/2] cos + x[i] sin, each product and the sum rounded to the
// dtype as torch computes q * cos + rotate_half(q) * sin; dimensions past rot pass through.
//                                             x (T, heads, head_dim), cos and sin (T, rot) in the dtype
struct Rope {
  static constexpr std::string_view name = "rope_", layer = "RotaryEmbedding";
  Tensor& x;
  const Tensor& cos;
  const Tensor& sin;
  DType dtype() const { return x.dtype(); }
  auto tensors() const { return tensor_list(x, cos, sin); }
};

// out = silu(gate) * up, silu's result rounded to the dtype first (Transformers' act_fn(gate) * up)
//                                             gate_up (T, 2I) as [gate | up], out (T, I)
struct SiluMul {
  static constexpr std::string_view name = "silu_mul", layer = "SiLUAndMul";
  const Tensor& gate_up;
  Tensor& out;
  DType dtype() const { return out.dtype(); }
  auto tensors() const { return tensor_list(gate_up, out); }
};

// x += y                                      x, y of one shape
struct Add {
  static constexpr std::string_view name = "add_", layer = "";
  Tensor& x;
  const Tensor& y;
  DType dtype() const { return x.dtype(); }
  auto tensors() const { return tensor_list(x, y); }
};

// out = x converted to out's dtype, rounding to nearest even     x, out of one shape; the kernel is chosen by
//                                                                 x's dtype and takes any out dtype
struct Cast {
  static constexpr std::string_view name = "cast", layer = "";
  const Tensor& x;
  Tensor& out;
  DType dtype() const { return x.dtype(); }
  auto tensors() const { return tensor_list(x, out); }
};

// Column blocks of x side by side, copied apart: x (T, sum of widths), outs[i] (T, width i), at most 4 outputs
struct SplitColumns {
  static constexpr std::string_view name = "split_columns", layer = "";
  static constexpr size_t kMaxOutputs = 4;
  const Tensor& x;
  std::span<Tensor* const> outs;
  DType dtype() const { return x.dtype(); }
  auto tensors() const { return tensor_list(x); }
};

// out[i] = x[rows[i]]                         x (T, H), rows (R), out (R, H)
struct GatherRows {
  static constexpr std::string_view name = "gather_rows", layer = "";
  const Tensor& x;
  const Tensor& rows;
  Tensor& out;
  DType dtype() const { return x.dtype(); }
  auto tensors() const { return tensor_list(x, rows, out); }
};

// ids[r] = the index of the largest value of row r, the first of equal ones (torch.argmax), or -1 when the row
// holds a NaN or an infinity (which greedy search reports rather than picks from).     x (R, V), ids (R)
// Optional: a device without it leaves greedy choice to the host, which reads the whole rows.
struct ArgmaxRows {
  static constexpr std::string_view name = "argmax_rows", layer = "";
  static constexpr bool optional = true;
  const Tensor& x;
  Tensor& ids;
  DType dtype() const { return x.dtype(); }
  auto tensors() const { return tensor_list(x, ids); }
};

// Where each sequence's query rows and cache blocks are, for one forward step; on the device.
struct AttentionMetadata {
  Tensor query_start;   // (S + 1): rows of sequence s are [query_start[s], query_start[s + 1])
  Tensor context_lens;  // (S): tokens of sequence s in the cache, this step's included
  Tensor block_tables;  // (S, max_blocks): cache block of every block_size tokens of sequence s
  Tensor positions;     // (T): position of each row in its sequence
  Tensor slots;         // (T): cache slot of each row (block * block_size + offset)
  int64_t max_context_len = 0;
};

// cache[slots[t]] = k[t], v[t]; a negative slot (a padding row) writes nothing
//                                             k, v (T, kv_heads, D), caches (blocks, block_size, kv_heads, D)
struct KvCacheWrite {
  static constexpr std::string_view name = "kv_cache_write", layer = "Attention";
  const Tensor& k;
  const Tensor& v;
  const Tensor& slots;
  Tensor& cache_k;
  Tensor& cache_v;
  DType dtype() const { return k.dtype(); }
  auto tensors() const { return tensor_list(k, v, slots, cache_k, cache_v); }
};

// Attention's inputs from the fused projection in one pass: qkv (T, (heads + 2 kv_heads) D) holds q, k and v
// side by side; q and k go through their per-head RMSNorms (Qwen3's q_norm and k_norm, when defined) and rope,
// rounded as rms_norm and rope_ round; q is written to `q`, k and v into the caches at `slots` (negative: not
// written).     q_norm, k_norm (D) or undefined, cos and sin (T, rot), slots (T), q (T, heads, D), caches as
//               kv_cache_write's
// Optional: where it is missing the layer runs split_columns, rms_norm, rope_ and kv_cache_write.
struct QkvRopeCache {
  static constexpr std::string_view name = "qkv_rope_cache", layer = "Attention";
  static constexpr bool optional = true;
  const Tensor& qkv;
  const Tensor& q_norm;
  const Tensor& k_norm;
  float eps;
  const Tensor& cos;
  const Tensor& sin;
  const Tensor& slots;
  Tensor& q;
  Tensor& cache_k;
  Tensor& cache_v;
  DType dtype() const { return qkv.dtype(); }
  auto tensors() const { return tensor_list(qkv, q_norm, k_norm, cos, sin, slots, q, cache_k, cache_v); }
};

// Causal grouped-query attention over the paged cache; window 0 is full attention, else a row sees its own
// position and the window-1 before it. Variants: "flash" scores, softmaxes (float32) and sums in one pass with a
// running maximum and rounds the output once (sdpa); "eager" follows Transformers' eager_attention_forward:
// every score of a row rounded to the dtype (q k^T, then times scale), a float32 softmax rounded to the dtype,
// then the weighted sum of values rounded once.             q, out (T, heads, D), caches as kv_cache_write's
struct PagedAttention {
  static constexpr std::string_view name = "paged_attention", layer = "Attention";
  const Tensor& q;
  const Tensor& cache_k;
  const Tensor& cache_v;
  const AttentionMetadata& meta;
  float scale;
  int64_t window;
  Tensor& out;
  DType dtype() const { return q.dtype(); }
  auto tensors() const {
    return tensor_list(q,
                      cache_k,
                      cache_v,
                      meta.query_start,
                      meta.context_lens,
                      meta.block_tables,
                      meta.positions,
                      out);
  }
};

// Whether a device may lack Op's kernels (a fused or convenience op that callers use only where it runs).
template <typename Op>
constexpr bool is_optional() {
  if constexpr (requires { Op::optional; }) return Op::optional;
  return false;
}

// Every op of the set, for code that visits them all: f.template operator()<Op>() for each.
using All = std::tuple<Embedding, Linear, RmsNorm, AddRmsNorm, Rope, SiluMul, Add, Cast, SplitColumns, GatherRows,
                       ArgmaxRows, KvCacheWrite, QkvRopeCache, PagedAttention>;
template <typename F>
void for_each_op(F&& f) {
  [&]<typename... Op>(std::tuple<Op...>*) { (f.template operator()<Op>(), ...); }(static_cast<All*>(nullptr));
}

}  // namespace tfm::op

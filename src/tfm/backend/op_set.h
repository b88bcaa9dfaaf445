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

#include "tfm/backend/adamw_scalars.h"
#include "tfm/backend/sampling_math.h"
#include "tfm/core/tensor.h"

namespace tfm::op {

// An op's tensors, for the checks every op gets (one device, contiguous).
template <typename... T>
auto tensor_list(const T&... t) {
  return std::array<const Tensor*, sizeof...(T)>{&t...};
}

// out[t] = table[ids[t]]                      table (V, H), ids (T), out (T, H)
// A negative id leaves its row unwritten: an id chosen from logits that were not finite (-1) reaches the step
// queued behind its own before the host reads it and reports the error.
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

// y += x @ w^T, the product added in float32 before the one rounding: a linear layer's output added into
// another's (LoRA's B(A(x)) into the base layer's) without keeping it; with w_by_columns, y += x @ w (w
// stored (K, N)): such a layer's input gradient added into another's (LoRA's dh A into the base layer's dx).
//                                          x (M, K), w (N, K) or with w_by_columns (K, N), y (M, N)
// Optional: a device without it runs no LoRA adapters yet.
struct LinearAdd {
  static constexpr std::string_view name = "linear_add", layer = "";
  static constexpr bool optional = true;
  const Tensor& x;
  const Tensor& w;
  Tensor& y;
  bool w_by_columns = false;
  int64_t N() const { return w.size(w_by_columns ? 1 : 0); }
  DType dtype() const { return x.dtype(); }
  auto tensors() const { return tensor_list(x, w, y); }
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

// A decoder block's entry in one pass where a kernel does it (decode's few rows): add_rms_norm folded into
// the linear layer after it and, with `gated`, silu_mul after that. With x defined, r = residual + x rounded,
// written to residual_out (a buffer of its own: every block of a kernel reads residual); else r = residual
// and residual_out is not written. y = linear(rms_norm(r, norm_weight, eps), w, bias), or silu_mul of that
// when gated (w's rows [gate | up]), rounded where those ops round. Without norm_weight (and x) there is no
// norm: y = linear(residual, w, bias), gated or not, for where the norm ran on its own because folding it
// does not pay but the SiLU gate still folds into the linear.
//                 residual, x, residual_out (M, K), norm_weight (K) or undefined, w (N, K), bias (N) or
//                 undefined, y (M, N), or (M, N / 2) when gated
// Optional, and a kernel may refuse arguments: the layer then runs add_rms_norm, linear and silu_mul.
struct NormLinear {
  static constexpr std::string_view name = "norm_linear", layer = "RMSNorm";
  static constexpr bool optional = true;
  static constexpr int64_t kMaxRows = 8;  // ops/ refuses more (decode's rows; prefill has the matmul's rate)
  const Tensor& residual;
  const Tensor& x;
  const Tensor& norm_weight;
  float eps;
  const Tensor& w;
  const Tensor& bias;
  bool gated;
  Tensor& residual_out;
  Tensor& y;
  DType dtype() const { return residual.dtype(); }
  auto tensors() const { return tensor_list(residual, x, norm_weight, w, bias, residual_out, y); }
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

// out[i] = x[rows[i]], a negative row unwritten  x (T, H), rows (R), out (R, H)
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

// Each row's next token, chosen as Transformers' sampling chooses it after these logits processors, in their
// order (a row's settings: SampleSettings, sampling_math.h):
//  1. penalties: each of the row's entries (token t, amount a; distinct tokens) makes x[t] = x[t] - a (OpenAI's
//     presence and frequency penalties, which the host sums per token), then, with repetition_penalty r != 1,
//     x[t] * r where below 0 and x[t] / r elsewhere (RepetitionPenaltyLogitsProcessor). Entries outside the row
//     are ignored.
//  2. greedy (temperature <= 0): the first largest value; else y = x / temperature (TemperatureLogitsWarper).
//  3. top-k (0 < top_k < V): tokens below the top_k-th largest value are dropped; its ties stay (TopKLogitsWarper).
//  4. top-p (top_p < 1): with weights w = exp(y - max) as fixed_mass integers over the tokens kept so far, the
//     cut c is the largest kept value whose tokens at or above it weigh at least top_p * their total (a float32
//     product, truncated); tokens below c are dropped (TopPLogitsWarper, except that every token tied with the
//     cut stays, where Transformers keeps those that its sort happens to place first).
//  5. min-p (min_p > 0): tokens with exp(y - max) < min_p are dropped (MinPLogitsWarper's probs < min_p * top
//     probability, compared before normalising).
//  6. the draw: the kept token with the largest race_score(y, key, token), the first on ties.
// ids[r] = -1 when row r's processed values hold a NaN or +inf, or are all -inf (no distribution to draw from;
// greedy search reports it as argmax_rows does). Draws are exact up to their 24-bit uniforms; devices agree
// on a row's token unless the float rounding of exp or log of their libraries decides a tie.
//                     logits (R, V), settings (R, kSampleSettingsWords) int32, penalties (N, 2) int32 as (token,
//                     float bits of the amount), ids (R) int32
// Optional: a device without it leaves the choice to the host, which reads the whole rows.
struct SampleRows {
  static constexpr std::string_view name = "sample_rows", layer = "";
  static constexpr bool optional = true;
  const Tensor& logits;
  const Tensor& settings;
  const Tensor& penalties;
  Tensor& ids;
  DType dtype() const { return logits.dtype(); }
  auto tensors() const { return tensor_list(logits, settings, penalties, ids); }
};

// Where each sequence's query rows and cache blocks are, for one forward step; on the device.
struct AttentionMetadata {
  Tensor query_start;   // (S + 1): rows of sequence s are [query_start[s], query_start[s + 1])
  Tensor context_lens;  // (S): tokens of sequence s in the cache, this step's included
  Tensor block_tables;  // (S, max_blocks): cache block of every block_size tokens of sequence s
  Tensor positions;     // (T): position of each row in its sequence
  Tensor slots;         // (T): cache slot of each row (block * block_size + offset)
  int64_t max_context_len = 0;
  bool one_row_per_sequence = false;  // T == S and query_start[s] == s (decode): what qkv_attention takes
  // slots[t] == t: row t's key and value belong in the caches' slot t, so that the caches' first T slots are
  // the rows' keys and values in order (a training step whose sequences but the last fill whole blocks).
  bool slots_in_order = false;
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

// qkv_rope_cache for a training step, without the cache: k and v heads are written to k and v, whose rows are
// q's (the step's kv_cache_write then fills the cache from them, and the backward reads them).
//                                             fields as qkv_rope_cache's; k, v (T, kv_heads, D)
// Optional: a device has it with qkv_rope_backward, and the layer runs both or neither.
struct QkvRope {
  static constexpr std::string_view name = "qkv_rope", layer = "Attention";
  static constexpr bool optional = true;
  const Tensor& qkv;
  const Tensor& q_norm;
  const Tensor& k_norm;
  float eps;
  const Tensor& cos;
  const Tensor& sin;
  Tensor& q;
  Tensor& k;
  Tensor& v;
  DType dtype() const { return qkv.dtype(); }
  auto tensors() const { return tensor_list(qkv, q_norm, k_norm, cos, sin, q, k, v); }
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

// paged_attention's "flash" form in a training forward, which also writes each row's log-sum-exp of its
// scaled scores (natural log, over the keys the row sees), so that attention_backward need not compute it
// again. Optional: where it is missing or refuses the arguments, the layer runs paged_attention and the
// backward computes the log-sum-exp itself.            fields as paged_attention's; lse (T, heads) float32
struct PagedAttentionLse {
  static constexpr std::string_view name = "paged_attention_lse", layer = "Attention";
  static constexpr bool optional = true;
  const Tensor& q;
  const Tensor& cache_k;
  const Tensor& cache_v;
  const AttentionMetadata& meta;
  float scale;
  int64_t window;
  Tensor& out;
  Tensor& lse;
  DType dtype() const { return q.dtype(); }
  auto tensors() const {
    return tensor_list(q, cache_k, cache_v, meta.query_start, meta.context_lens, meta.block_tables,
                       meta.positions, out, lse);
  }
  PagedAttention attention() const { return {q, cache_k, cache_v, meta, scale, window, out}; }
};

// qkv_rope_cache and paged_attention's "flash" form in one pass, for a step of one query row a sequence
// (meta.one_row_per_sequence: decode): a row's query and its own new key and value come from qkv, normalised
// and rotated as qkv_rope_cache does them, the keys and values before it from the cache, into which the new
// ones are written at meta.slots. Fields as those two ops'. Optional: where it is missing or refuses the
// arguments, the layer runs qkv_rope_cache and paged_attention.
struct QkvAttention {
  static constexpr std::string_view name = "qkv_attention", layer = "Attention";
  static constexpr bool optional = true;
  const Tensor& qkv;
  const Tensor& q_norm;
  const Tensor& k_norm;
  float eps;
  const Tensor& cos;
  const Tensor& sin;
  const AttentionMetadata& meta;
  float scale;
  int64_t window;
  Tensor& cache_k;
  Tensor& cache_v;
  Tensor& out;
  DType dtype() const { return qkv.dtype(); }
  auto tensors() const {
    return tensor_list(qkv, q_norm, k_norm, cos, sin, meta.query_start, meta.context_lens, meta.block_tables,
                       meta.positions, meta.slots, cache_k, cache_v, out);
  }
  // The two ops it folds, on its tensors, for kernels that share their launch set-up: out stands in for the
  // queries that would pass between them (their shape; no kernel of this op reads or writes them there).
  QkvRopeCache rope_cache() const {
    return {qkv, q_norm, k_norm, eps, cos, sin, meta.slots, out, cache_k, cache_v};
  }
  PagedAttention attention() const { return {out, cache_k, cache_v, meta, scale, window, out}; }
};

// split_columns' inverse: the inputs copied side by side into the columns of out.
//                                             ins[i] (T, width i), at most 4; out (T, sum of widths)
struct ConcatColumns {
  static constexpr std::string_view name = "concat_columns", layer = "";
  static constexpr bool optional = true;
  std::span<const Tensor* const> ins;
  Tensor& out;
  DType dtype() const { return out.dtype(); }
  auto tensors() const { return tensor_list(out); }
};

// One block of op::AddScaledColumns: out[:, out_column + c] (+)= scale * x[:, x_column + c] for c < width,
// out (T, N) and x (T, M), the columns inside each. The block holds its views (rows of a larger matrix,
// often), so that a list of blocks keeps them alive.
struct ScaledColumns {
  Tensor out;
  int64_t out_column;
  Tensor x;
  int64_t x_column;
  int64_t width;
  float scale;
};

// Up to kMaxBlocks column blocks at once, each added into its out (accumulate) or written over its columns of
// out, the product rounded to the dtype first, then the sum (torch's `result + lora_B(...) * scaling`, LoRA's
// forward). LoRA's stacked B is its adapters' scaled B's written into their blocks, and the adapters' B
// gradients their scaled blocks of the stacked one's: a launch a Linear, not one an adapter. The blocks' outs
// are apart from one another and from every x.
// Optional: a device without it runs no LoRA adapters yet.
struct AddScaledColumns {
  static constexpr std::string_view name = "add_scaled_columns_", layer = "";
  static constexpr bool optional = true;
  static constexpr size_t kMaxBlocks = 4;
  std::span<const ScaledColumns> blocks;
  bool accumulate;
  DType dtype() const { return blocks.front().out.dtype(); }
  std::vector<const Tensor*> tensors() const {
    std::vector<const Tensor*> out;
    for (const ScaledColumns& b : blocks) out.insert(out.end(), {&b.out, &b.x});
    return out;
  }
};

// ---- Training: each forward op's backward, the loss and the optimizer step. ----
// Gradients of parameters are float32 accumulators, added to (+=) so that micro-batches accumulate; gradients
// of activations are in the op's dtype and written (=). An undefined gradient output is not computed. Kernels
// compute in float32 and round where torch's autograd rounds: once per op, to the activation's dtype.
// Optional: a device without them cannot train yet.

// Linear's backward: dx = dy @ w (rounded once), dw += dy^T @ x and dbias += the column sums of dy, both
// summed in float32 into the accumulators (torch rounds dy^T @ x to the dtype before its float32 master adds
// it; tfm keeps the bits that rounding drops).     x (M, K), w (N, K), dy (M, N), dx (M, K) or undefined,
//                                             dw (N, K) and dbias (N) float32 or undefined
struct LinearBackward {
  static constexpr std::string_view name = "linear_backward", layer = "Linear";
  static constexpr bool optional = true;
  const Tensor& x;
  const Tensor& w;
  const Tensor& dy;
  Tensor& dx;
  Tensor& dw;
  Tensor& dbias;
  DType dtype() const { return dy.dtype(); }
  auto tensors() const { return tensor_list(x, w, dy, dx, dw, dbias); }
};

// RMSNorm's backward, from its input: with n = x / sqrt(mean(x^2) + eps), dn = dout * weight,
// dx = (dn - n mean(dn n)) / sqrt(mean(x^2) + eps), dweight += the sums over rows of dout * n (n rounded to
// the dtype, as the forward's product takes it; the sums in float32). With `accumulate`, dx += that gradient
// (rounded to the dtype, then the sum, as add_ adds it: the residual stream's gradient).
//                                 x, dout, dx (rows, D) or (T, heads, D), weight (D), dweight (D) float32 or
//                                 undefined; dx may be dout where it is not accumulated into
struct RmsNormBackward {
  static constexpr std::string_view name = "rms_norm_backward", layer = "RMSNorm";
  static constexpr bool optional = true;
  const Tensor& x;
  const Tensor& weight;
  float eps;
  const Tensor& dout;
  Tensor& dx;
  Tensor& dweight;
  bool accumulate = false;
  DType dtype() const { return x.dtype(); }
  auto tensors() const { return tensor_list(x, weight, dout, dx, dweight); }
};

// SiLU-gate's backward: with s = sigmoid(gate), dgate = dout up s (1 + gate (1 - s)), dup = dout silu(gate).
//                                             gate_up, dgate_up (T, 2I) as [gate | up], dout (T, I)
struct SiluMulBackward {
  static constexpr std::string_view name = "silu_mul_backward", layer = "SiLUAndMul";
  static constexpr bool optional = true;
  const Tensor& gate_up;
  const Tensor& dout;
  Tensor& dgate_up;
  DType dtype() const { return dout.dtype(); }
  auto tensors() const { return tensor_list(gate_up, dout, dgate_up); }
};

// Embedding's backward: dtable[ids[t]] += dout[t].          ids (T), dout (T, H), dtable (V, H) float32
struct EmbeddingBackward {
  static constexpr std::string_view name = "embedding_backward", layer = "Embedding";
  static constexpr bool optional = true;
  const Tensor& ids;
  const Tensor& dout;
  Tensor& dtable;
  DType dtype() const { return dout.dtype(); }
  auto tensors() const { return tensor_list(ids, dout, dtable); }
};

// Causal grouped-query attention's backward for sequences that attend only to themselves (a training batch:
// sequence s is rows [query_start[s], query_start[s + 1]) at positions 0, 1, ...), from the forward's inputs
// and output: the softmax is recomputed in float32, dq, dk and dv are written (rounded once). lse, where
// defined, is the forward's log-sum-exp of each row (paged_attention_lse's), which a kernel may read instead
// of computing. max_rows, where known (0: not), is the longest sequence's rows: a kernel may size a workspace
// by it (a form keeping every score's gradient, quadratic in the length), so it must not be short of the
// truth.
//               q, out, dout, dq (T, heads, D); k, v, dk, dv (T, kv_heads, D); query_start (S + 1) int32;
//               lse (T, heads) float32 or undefined
struct AttentionBackward {
  static constexpr std::string_view name = "attention_backward", layer = "Attention";
  static constexpr bool optional = true;
  const Tensor& q;
  const Tensor& k;
  const Tensor& v;
  const Tensor& out;
  const Tensor& dout;
  const Tensor& query_start;
  float scale;
  int64_t window;  // 0: full attention
  Tensor& dq;
  Tensor& dk;
  Tensor& dv;
  const Tensor& lse;
  int64_t max_rows = 0;
  DType dtype() const { return q.dtype(); }
  auto tensors() const { return tensor_list(q, k, v, out, dout, query_start, dq, dk, dv, lse); }
};

// qkv_rope's backward: the gradient of the fused projection's output from those of q, k and v. Each q or k
// head's gradient is rotated by (cos, sin) as rope_ rotates and rounded (the caller passes -sin: a rotation's
// transpose is the rotation back), then taken back through its norm, when the model has one, as
// rms_norm_backward takes it, the norm's input read from qkv; the norm weights' gradients are added into
// dq_norm and dk_norm where defined. v heads' gradients are copied.
//               qkv, dqkv (T, (heads + 2 kv_heads) D); dq (T, heads, D); dk, dv (T, kv_heads, D);
//               q_norm, k_norm (D) or undefined; dq_norm, dk_norm (D) float32 or undefined; cos, sin (T, rot)
struct QkvRopeBackward {
  static constexpr std::string_view name = "qkv_rope_backward", layer = "Attention";
  static constexpr bool optional = true;
  const Tensor& qkv;
  const Tensor& q_norm;
  const Tensor& k_norm;
  float eps;
  const Tensor& cos;
  const Tensor& sin;
  const Tensor& dq;
  const Tensor& dk;
  const Tensor& dv;
  Tensor& dqkv;
  Tensor& dq_norm;
  Tensor& dk_norm;
  DType dtype() const { return qkv.dtype(); }
  auto tensors() const {
    return tensor_list(qkv, q_norm, k_norm, cos, sin, dq, dk, dv, dqkv, dq_norm, dk_norm);
  }
};

// Inverted dropout with a counter-based random stream: element i is kept when
// u(seed, i) = (splitmix64(splitmix64(seed) ^ i) >> 40) / 2^24 (sampling_math.h) is at least p, and then scaled by 1 / (1 - p)
// (rounded once), else zeroed. The same seed gives the same mask, so that applying it to a gradient is its
// backward. torch's Philox stream is not reproduced.            x, out of one shape; out may be x; 0 <= p < 1
struct Dropout {
  static constexpr std::string_view name = "dropout", layer = "";
  static constexpr bool optional = true;
  const Tensor& x;
  float p;
  uint64_t seed;
  Tensor& out;
  DType dtype() const { return x.dtype(); }
  auto tensors() const { return tensor_list(x, out); }
};

// Causal LM cross-entropy of each row against its label, its gradient in the same pass: the logits are taken
// in float32 (Transformers' loss upcasts them); loss[0] = the sum over rows of -log softmax(logits)[label],
// dlogits = (softmax - onehot(label)) * grad_scale rounded to the dtype; a row labelled -100 adds no loss and
// gets a zero gradient.        logits, dlogits (R, V), labels (R) int32, loss (1) float32; dlogits may be logits
struct CrossEntropy {
  static constexpr std::string_view name = "cross_entropy", layer = "";
  static constexpr bool optional = true;
  static constexpr int32_t kIgnoreIndex = -100;  // Transformers' ignore_index
  const Tensor& logits;
  const Tensor& labels;
  float grad_scale;
  Tensor& loss;
  Tensor& dlogits;
  DType dtype() const { return logits.dtype(); }
  auto tensors() const { return tensor_list(logits, labels, loss, dlogits); }
};

// out[0] += the sum of x's squared elements (a gradient norm's part).          x float32, out (1) float32
struct SumSquares {
  static constexpr std::string_view name = "sum_squares", layer = "";
  static constexpr bool optional = true;
  const Tensor& x;
  Tensor& out;
  DType dtype() const { return x.dtype(); }
  auto tensors() const { return tensor_list(x, out); }
};

// One AdamW step as torch.optim.AdamW takes it (decoupled weight decay), on float32 state: g = grad *
// grad_scale (clipping's factor), w *= 1 - lr weight_decay, m = lerp(m, g, 1 - beta1),
// v = beta2 v + (1 - beta2) g^2, w -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps).
// `master` is the float32 weight; `param`, when defined, is the model's copy in its dtype, set to the
// master's value rounded.                      master, grad, exp_avg, exp_avg_sq float32 of one shape;
//                                              param of that shape or undefined
struct AdamW {
  static constexpr std::string_view name = "adamw", layer = "";
  static constexpr bool optional = true;
  Tensor& master;
  const Tensor& grad;
  Tensor& exp_avg;
  Tensor& exp_avg_sq;
  Tensor& param;
  // Host scalars in double, as torch's Python floats: 1 - beta2 of a float32 beta2 would differ in its 5th
  // digit.
  double lr, beta1, beta2, eps, weight_decay, grad_scale;
  int64_t step;  // 1 on the first
  DType dtype() const { return master.dtype(); }
  auto tensors() const { return tensor_list(master, grad, exp_avg, exp_avg_sq, param); }
  AdamWScalars scalars() const { return adamw_scalars(lr, beta1, beta2, eps, weight_decay, grad_scale, step); }
};

// Whether a device may lack Op's kernels (a fused or convenience op that callers use only where it runs).
template <typename Op>
constexpr bool is_optional() {
  if constexpr (requires { Op::optional; }) return Op::optional;
  return false;
}

// Every op of the set, for code that visits them all: f.template operator()<Op>() for each.
using All = std::tuple<Embedding, Linear, LinearAdd, RmsNorm, AddRmsNorm, NormLinear, Rope, SiluMul, Add,
                       Cast, SplitColumns, GatherRows, ArgmaxRows, KvCacheWrite, QkvRopeCache, QkvRope,
                       PagedAttention, PagedAttentionLse, QkvAttention, LinearBackward, RmsNormBackward,
                       SiluMulBackward, EmbeddingBackward, AttentionBackward, QkvRopeBackward, CrossEntropy,
                       SumSquares, AdamW, ConcatColumns, AddScaledColumns, Dropout, SampleRows>;
template <typename F>
void for_each_op(F&& f) {
  [&]<typename... Op>(std::tuple<Op...>*) { (f.template operator()<Op>(), ...); }(static_cast<All*>(nullptr));
}

}  // namespace tfm::op

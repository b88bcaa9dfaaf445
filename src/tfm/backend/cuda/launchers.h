// The launchers of the CUDA kernels, for the C++20 host code that unpacks the ops (kernels.cpp). One template
// per op family serves every dtype: T is a storage type of floats.h (float, bfloat16, float16), which the .cu
// files read as float, __nv_bfloat16 and __half; kernels compute in float32 and round where op_set.h says.
// Pointers are device memory of the current device; work goes to its stream (runtime.h). A launch that fails
// throws tfm::Error naming the kernel. This header stays within what nvcc's C++17 takes.
#pragma once

#include <cstdint>

#include "tfm/backend/adamw_scalars.h"
#include "tfm/backend/paged_attention_args.h"
#include "tfm/backend/sampling_math.h"
#include "tfm/core/floats.h"

namespace tfm::cuda::launch {

// Rows of bytes moved without looking at them: row r of `dst` (at dst_rows[r], or r when null) becomes row r
// of `src` (at src_rows[r], or r), row_bytes long; rows start every src_pitch / dst_pitch bytes.
struct RowCopy {
  const void* src;
  const int32_t* src_rows;
  int64_t src_pitch;
  void* dst;
  const int32_t* dst_rows;
  int64_t dst_pitch;
  int64_t row_bytes;
};
constexpr int kMaxRowCopies = 4;
// Up to kMaxRowCopies copies of `rows` rows each, in one launch; `op` names them in errors.
void copy_rows(const RowCopy* copies, int count, int64_t rows, const char* op);

template <typename T>
void add(T* x, const T* y, int64_t n);
template <typename In, typename Out>
void cast(const In* x, Out* out, int64_t n);
// gate_up (rows, 2 * inter) as [gate | up], out (rows, inter)
template <typename T>
void silu_mul(const T* gate_up, int64_t rows, int64_t inter, T* out);
// x (rows, heads, head_dim) in place, cos and sin (rows, rot)
template <typename T>
void rope(T* x, const T* cos, const T* sin, int64_t rows, int64_t heads, int64_t head_dim, int64_t rot);

// y (M, N) = x (M, K) @ w (N, K)^T + bias (N, or null) for M <= kMaxGemvRows, when gemv_takes says the
// shape and addresses suit it (16-byte pieces of every row). With norm_weight, op::NormLinear: the rows are
// rms_norm(residual [+ pending]) (x unused; residual_out gets residual + pending when pending is given).
// Gated (with a norm or without), y (M, N / 2) = silu_mul of the product.
constexpr int kMaxGemvRows = 8;
template <typename T>
struct Gemv {
  const T* x;
  const T* w;
  const T* bias;
  T* y;
  int64_t M, K, N;
  const T* residual = nullptr;
  const T* pending = nullptr;
  const T* norm_weight = nullptr;
  float eps = 0.f;
  T* residual_out = nullptr;
  bool gated = false;
};
template <typename T>
bool gemv_takes(const Gemv<T>& a);
template <typename T>
void gemv(const Gemv<T>& a);

// ids[r] = the first index of row r's largest value, -1 when the row holds a NaN or an infinity     x (rows, V)
// `workspace`: argmax_rows_workspace_bytes of device memory (none when that is 0).
int64_t argmax_rows_workspace_bytes(int64_t rows, int64_t V);
template <typename T>
void argmax_rows(const T* x, int64_t rows, int64_t V, int32_t* ids, void* workspace);

// op::SampleRows over pointers: logits (rows, V), settings (rows), entries (num_entries, 2), ids (rows)
// `workspace`: sample_rows_workspace_bytes of device memory (none when that is 0).
int64_t sample_rows_workspace_bytes(int64_t rows, int64_t V);
template <typename T>
void sample_rows(const T* logits, int64_t rows, int64_t V, const SampleSettings* settings, const int32_t* entries,
                 int64_t num_entries, int32_t* ids, void* workspace);

// op::QkvRopeCache over pointers; q_norm and k_norm may be null. Without slots (op::QkvRope), cache_k and
// cache_v are k and v, (rows, kv_heads, head_dim): row t's heads go to row t.
struct QkvRopeCacheArgs {
  const void* qkv;
  const void* q_norm;
  const void* k_norm;
  float eps;
  const void* cos;
  const void* sin;
  const int32_t* slots;
  void* q;
  void* cache_k;
  void* cache_v;
  int64_t rows, heads, kv_heads, head_dim, rot;
};
template <typename T>
void qkv_rope_cache(const QkvRopeCacheArgs& args);

// op::QkvRopeBackward over pointers; q_norm, k_norm, dq_norm and dk_norm may be null.
struct QkvRopeBackwardArgs {
  const void* qkv;
  const void* q_norm;
  const void* k_norm;
  float eps;
  const void* cos;
  const void* sin;
  const void* dq;
  const void* dk;
  const void* dv;
  void* dqkv;
  float* dq_norm;
  float* dk_norm;
  int64_t rows, heads, kv_heads, head_dim, rot;
};
template <typename T>
void qkv_rope_backward(const QkvRopeBackwardArgs& args);

// x, out (rows, dim); out may be x.
template <typename T>
void rms_norm(const T* x, const T* weight, int64_t rows, int64_t dim, float eps, T* out);
// residual += x, then out = rms_norm(residual), in one pass over each row.
template <typename T>
void add_rms_norm(T* residual, const T* x, const T* weight, int64_t rows, int64_t dim, float eps, T* out);

// `eager` rounds scores and probabilities to T as Transformers' eager attention does; else the one-pass form.
// `workspace` holds paged_attention_workspace(args, eager) floats of device memory (null when that is 0).
template <typename T>
int64_t paged_attention_workspace(const PagedAttentionArgs& args, bool eager);
template <typename T>
void paged_attention(const PagedAttentionArgs& args, bool eager, float* workspace);
// Whether paged_attention's flash form keeps each row's log-sum-exp (args.lse) for these arguments: the tile
// kernels of the head sizes attention_backward's tiles take, which read it.
template <typename T>
bool paged_attention_keeps_lse(const PagedAttentionArgs& args);
// op::QkvAttention: `inputs` as qkv_rope_cache's (its q unused), `args` as paged_attention's (its q unused),
// where qkv_attention_takes says the decode kernel serves them; `workspace` as paged_attention's flash
// form's.
template <typename T>
bool qkv_attention_takes(const QkvRopeCacheArgs& inputs, const PagedAttentionArgs& args);
template <typename T>
void qkv_attention(const QkvRopeCacheArgs& inputs, const PagedAttentionArgs& args, float* workspace);

// ---- Training (training.cu; linear's backward is cuBLASLt's, in linear.cpp). ----

// sums[c] += the sum over rows of x[r, c]                              x (rows, cols), sums (cols) float32
template <typename T>
void column_sums(const T* x, int64_t rows, int64_t cols, float* sums);
// op::RmsNormBackward; dx or dweight may be null (not computed)
template <typename T>
void rms_norm_backward(const T* x, const T* weight, const T* dout, int64_t rows, int64_t dim, float eps,
                       bool accumulate, T* dx, float* dweight);
template <typename T>
void silu_mul_backward(const T* gate_up, const T* dout, int64_t rows, int64_t inter, T* dgate_up);
template <typename T>
void embedding_backward(const int32_t* ids, const T* dout, int64_t rows, int64_t hidden, float* dtable);
// op::CrossEntropy: loss[0] (zeroed first) = the rows' summed loss; a row labelled kIgnoreLabel gets zeros.
constexpr int32_t kIgnoreLabel = -100;
template <typename T>
void cross_entropy(const T* logits, const int32_t* labels, int64_t rows, int64_t vocab, float grad_scale,
                   float* loss, T* dlogits);
// out[0] += the sum of x's squares
void sum_squares(const float* x, int64_t n, float* out);
// param (the model's copy in its dtype) may be null
template <typename P>
void adamw(float* w, const float* grad, float* m, float* v, P* param, const AdamWScalars& s, int64_t n);
// op::AddScaledColumns: block i's out (rows, out_cols), its x (rows, x_cols)
template <typename T>
struct ScaledColumnsBlock {
  T* out;
  int64_t out_cols, out_column;
  const T* x;
  int64_t x_cols, x_column, rows, width;
  float scale;
};
inline constexpr int kMaxScaledColumnsBlocks = 4;  // op::AddScaledColumns::kMaxBlocks
template <typename T>
void add_scaled_columns(const ScaledColumnsBlock<T>* blocks, int count, bool accumulate);
// op::Dropout
template <typename T>
void dropout(const T* x, float p, uint64_t seed, int64_t n, T* out);
// op::AttentionBackward; lse and delta are float32 scratch of (rows, heads), `kept` a workspace of
// attention_backward_kept_bytes (none where that is 0)
struct AttentionBackwardArgs {
  const int32_t* query_start;  // num_seqs + 1 offsets
  int64_t num_seqs, rows, heads, kv_heads, head_dim, window;
  float scale;
  const float*
      forward_lse;   // (rows, heads), natural log, or null: the forward's log-sum-exp, where it kept it
  int64_t max_rows;  // the longest sequence's rows, or 0 where unknown
};
template <typename T>
int64_t attention_backward_kept_bytes(const AttentionBackwardArgs& a);
template <typename T>
void attention_backward(const AttentionBackwardArgs& a, const T* q, const T* k, const T* v, const T* out,
                        const T* dout, float* lse, float* delta, void* kept, T* dq, T* dk, T* dv);

}  // namespace tfm::cuda::launch

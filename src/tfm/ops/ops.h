// The op set the models use (backend/op_set.h describes each op). Each op checks shapes, dtypes and devices
// (a mismatch is a tfm::Error naming the op and the tensors), then runs the kernel the registry has for the
// tensors' device and dtype: `variant`'s when it has one that accepts the arguments, else the default.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tfm/backend/op_set.h"
#include "tfm/core/tensor.h"

namespace tfm::ops {

using op::AttentionMetadata;

// The ops of the op set that have no default kernel for `device` in `dtype` (empty: a model can run there).
std::vector<std::string_view> ops_without_kernels(DeviceType device, DType dtype);

void embedding(const Tensor& table, const Tensor& ids, Tensor& out, std::string_view variant = {});
void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, std::string_view variant = {});
void linear_add(const Tensor& x, const Tensor& w, Tensor& y,
                bool w_by_columns = false);  // y += x @ w^T (or w)
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, std::string_view variant = {});
void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps, Tensor& out,
                  std::string_view variant = {});
// op::NormLinear where a kernel of `variant` takes the arguments; false, having done nothing, where none does.
// norm_linear_runs_on says whether `device` has one at all (before its outputs are allocated).
bool norm_linear_runs_on(DeviceType device, DType dtype, std::string_view variant);
bool norm_linear(const Tensor& residual, const Tensor& x, const Tensor& norm_weight, float eps, const Tensor& w,
                 const Tensor& bias, bool gated, Tensor& residual_out, Tensor& y, std::string_view variant);
void rope_(Tensor& x, const Tensor& cos, const Tensor& sin, std::string_view variant = {});
void silu_mul(const Tensor& gate_up, Tensor& out, std::string_view variant = {});
void add_(Tensor& x, const Tensor& y);
void cast(const Tensor& x, Tensor& out);
void split_columns(const Tensor& x, std::span<Tensor* const> outs);
void concat_columns(std::span<const Tensor* const> ins, Tensor& out);
void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out);  // of a float dtype, or int32
// op::AddScaledColumns over any number of blocks, op::AddScaledColumns::kMaxBlocks a launch; accumulate false
// writes each block over its columns.
void add_scaled_columns_(std::span<const op::ScaledColumns> blocks, bool accumulate);
void argmax_rows(const Tensor& x, Tensor& ids);
bool argmax_rows_runs_on(DeviceType device, DType dtype);
void sample_rows(const Tensor& logits, const Tensor& settings, const Tensor& penalties, Tensor& ids);
bool sample_rows_runs_on(DeviceType device, DType dtype);

// A layer's KV cache is a key and a value tensor of (blocks, block_size, kv_heads, head_dim).
void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& cache_k, Tensor& cache_v,
                    std::string_view variant = {});
void qkv_rope_cache(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& cos,
                    const Tensor& sin, const Tensor& slots, Tensor& q, Tensor& cache_k, Tensor& cache_v,
                    std::string_view variant = {});
bool qkv_rope_cache_runs_on(DeviceType device, DType dtype);
// A training step's form of qkv_rope_cache (k and v to tensors of q's rows) and its backward, which a device
// has both of or neither (qkv_rope_trains_on).
void qkv_rope(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& cos,
              const Tensor& sin, Tensor& q, Tensor& k, Tensor& v, std::string_view variant = {});
bool qkv_rope_trains_on(DeviceType device, DType dtype);
void paged_attention(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v, const AttentionMetadata& meta,
                     float scale, int64_t window, Tensor& out, std::string_view variant = {});
// op::PagedAttentionLse where the Attention variant `variant` has a kernel for it that takes the arguments
// (no other variant stands in); false, having done nothing, elsewhere. paged_attention_lse_runs_on says
// whether `device` has such a kernel at all (before the log-sum-exp is allocated).
bool paged_attention_lse(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v,
                         const AttentionMetadata& meta, float scale, int64_t window, Tensor& out, Tensor& lse,
                         std::string_view variant);
bool paged_attention_lse_runs_on(DeviceType device, DType dtype, std::string_view variant);
// op::QkvAttention where the Attention variant `variant` has a kernel for it that takes the arguments (no
// other variant stands in); false, having done nothing, elsewhere.
bool qkv_attention(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                   const Tensor& cos, const Tensor& sin, const AttentionMetadata& meta, float scale,
                   int64_t window, Tensor& cache_k, Tensor& cache_v, Tensor& out, std::string_view variant);

// Training (op_set.h describes each). Gradients of parameters are float32 accumulators (+=); an undefined
// output is not computed.
void linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& dbias);
void rms_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dout, Tensor& dx,
                       Tensor& dweight, bool accumulate = false);
void silu_mul_backward(const Tensor& gate_up, const Tensor& dout, Tensor& dgate_up);
void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable);
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& dout, const Tensor& query_start, float scale, int64_t window,
                        Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& lse = Tensor(),
                        int64_t max_rows = 0);
void qkv_rope_backward(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                       const Tensor& cos, const Tensor& sin, const Tensor& dq, const Tensor& dk,
                       const Tensor& dv, Tensor& dqkv, Tensor& dq_norm, Tensor& dk_norm);
void cross_entropy(const Tensor& logits, const Tensor& labels, float grad_scale, Tensor& loss, Tensor& dlogits);
void sum_squares(const Tensor& x, Tensor& out);
void dropout(const Tensor& x, float p, uint64_t seed, Tensor& out);
struct AdamWStep {
  double lr, beta1, beta2, eps, weight_decay;
  double grad_scale = 1.0;
  int64_t step;  // 1 on the first
};
void adamw(Tensor& master, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& param,
           const AdamWStep& step);

}  // namespace tfm::ops

// The CUDA kernels of the op set but matmul (linear.cpp): each makes its tensors' device current, unpacks the
// op and calls a launcher of launchers.h.
#include <vector>

#include "tfm/backend/backend.h"
#include "tfm/backend/cuda/cuda_backend.h"
#include "tfm/backend/cuda/kernel_tensors.h"
#include "tfm/backend/cuda/launchers.h"
#include "tfm/backend/cuda/runtime.h"
#include "tfm/backend/op_set.h"
#include "tfm/backend/pointer_args.h"
#include "tfm/core/floats.h"

namespace tfm::cuda {
namespace {

// Copies of whole rows do not look at the values: one kernel per op serves every dtype.
void embedding(const op::Embedding& a) {
  use_device_of(a.out);
  const int64_t row_bytes = a.table.size(1) * static_cast<int64_t>(dtype_size(a.dtype()));
  const launch::RowCopy copy{a.table.raw(), a.ids.data<int32_t>(), row_bytes, a.out.raw(), nullptr, row_bytes,
                             row_bytes};
  launch::copy_rows(&copy, 1, a.ids.size(0), "embedding");
}

void gather_rows(const op::GatherRows& a) {
  use_device_of(a.out);
  const int64_t row_bytes = a.x.size(1) * static_cast<int64_t>(dtype_size(a.dtype()));
  const launch::RowCopy copy{a.x.raw(), a.rows.data<int32_t>(), row_bytes, a.out.raw(), nullptr, row_bytes,
                             row_bytes};
  launch::copy_rows(&copy, 1, a.rows.size(0), "gather_rows");
}

void kv_cache_write(const op::KvCacheWrite& a) {
  use_device_of(a.k);
  const int64_t rows = a.k.size(0), row_bytes = rows ? static_cast<int64_t>(a.k.nbytes()) / rows : 0;
  const int32_t* slots = a.slots.data<int32_t>();
  const launch::RowCopy copies[] = {
      {a.k.raw(), nullptr, row_bytes, a.cache_k.raw(), slots, row_bytes, row_bytes},
      {a.v.raw(), nullptr, row_bytes, a.cache_v.raw(), slots, row_bytes, row_bytes}};
  launch::copy_rows(copies, 2, rows, "kv_cache_write");
}

void split_columns(const op::SplitColumns& a) {
  use_device_of(a.x);
  const ColumnSplit split = column_split(a);
  const int64_t element = static_cast<int64_t>(dtype_size(a.dtype()));
  int64_t pitch = 0;
  for (int64_t w : split.widths) pitch += w * element;
  std::vector<launch::RowCopy> copies;
  const char* column = static_cast<const char*>(a.x.raw());
  for (size_t i = 0; i < split.outs.size(); ++i) {
    const int64_t bytes = split.widths[i] * element;
    copies.push_back({column, nullptr, pitch, split.outs[i], nullptr, bytes, bytes});
    column += bytes;
  }
  launch::copy_rows(copies.data(), static_cast<int>(copies.size()), a.x.size(0), "split_columns");
}

template <typename T>
void add(const op::Add& a) {
  use_device_of(a.x);
  launch::add(a.x.data<T>(), a.y.data<T>(), a.x.numel());
}

template <typename In>
void cast(const op::Cast& a) {
  use_device_of(a.out);
  visit_float(a.out.dtype(),
              [&]<typename Out>() { launch::cast(a.x.data<In>(), a.out.data<Out>(), a.x.numel()); });
}

template <typename T>
void argmax_rows(const op::ArgmaxRows& a) {
  use_device_of(a.x);
  const Tensor workspace =
      workspace_beside(a.x, launch::argmax_rows_workspace_bytes(a.x.size(0), a.x.size(1)));
  launch::argmax_rows(a.x.data<T>(), a.x.size(0), a.x.size(1), a.ids.data<int32_t>(),
                      workspace_pointer(workspace));
}

template <typename T>
void sample_rows(const op::SampleRows& a) {
  use_device_of(a.logits);
  const Tensor workspace =
      workspace_beside(a.logits, launch::sample_rows_workspace_bytes(a.logits.size(0), a.logits.size(1)));
  launch::sample_rows(a.logits.data<T>(), a.logits.size(0), a.logits.size(1),
                      reinterpret_cast<const SampleSettings*>(a.settings.data<int32_t>()),
                      a.penalties.data<int32_t>(), a.penalties.size(0), a.ids.data<int32_t>(),
                      workspace_pointer(workspace));
}

template <typename T>
void rms_norm(const op::RmsNorm& a) {
  use_device_of(a.out);
  const int64_t dim = a.weight.size(0);
  launch::rms_norm(a.x.data<T>(), a.weight.data<T>(), dim ? a.x.numel() / dim : 0, dim, a.eps,
                   a.out.data<T>());
}

template <typename T>
void add_rms_norm_fused(const op::AddRmsNorm& a) {
  use_device_of(a.out);
  const int64_t dim = a.weight.size(0);
  launch::add_rms_norm(a.residual.data<T>(), a.x.data<T>(), a.weight.data<T>(),
                       dim ? a.residual.numel() / dim : 0, dim, a.eps, a.out.data<T>());
}

template <typename T>
void rope(const op::Rope& a) {
  use_device_of(a.x);
  launch::rope(a.x.data<T>(), a.cos.data<T>(), a.sin.data<T>(), a.x.size(0), a.x.size(1), a.x.size(2),
               a.cos.size(1));
}

// The launchers' view of an op making attention's inputs from the fused projection `qkv`: rows of `heads` q
// heads and `kv_heads` k and v heads, written to q and, at `slots`, into the caches k and v (without slots,
// to k and v at their rows).
launch::QkvRopeCacheArgs qkv_args(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                                  const Tensor& cos, const Tensor& sin, int64_t heads, int64_t kv_heads,
                                  const int32_t* slots, void* q, void* k, void* v) {
  return {qkv.raw(),
          raw_or_null(q_norm),
          raw_or_null(k_norm),
          eps,
          cos.raw(),
          sin.raw(),
          slots,
          q,
          k,
          v,
          qkv.size(0),
          heads,
          kv_heads,
          qkv.size(1) / (heads + 2 * kv_heads),
          cos.size(1)};
}

launch::QkvRopeCacheArgs qkv_rope_cache_args(const op::QkvRopeCache& a) {
  return qkv_args(a.qkv, a.q_norm, a.k_norm, a.eps, a.cos, a.sin, a.q.size(1), a.cache_k.size(2),
                  a.slots.data<int32_t>(), a.q.raw(), a.cache_k.raw(), a.cache_v.raw());
}

template <typename T>
void qkv_rope_cache(const op::QkvRopeCache& a) {
  use_device_of(a.q);
  launch::qkv_rope_cache<T>(qkv_rope_cache_args(a));
}

// qkv_rope_cache's kernel with no slots: k and v in place of the cache.
template <typename T>
void qkv_rope(const op::QkvRope& a) {
  use_device_of(a.q);
  launch::qkv_rope_cache<T>(qkv_args(a.qkv, a.q_norm, a.k_norm, a.eps, a.cos, a.sin, a.q.size(1), a.k.size(1),
                                     nullptr, a.q.raw(), a.k.raw(), a.v.raw()));
}

template <typename T>
void silu_mul(const op::SiluMul& a) {
  use_device_of(a.out);
  launch::silu_mul(a.gate_up.data<T>(), a.out.size(0), a.out.size(1), a.out.data<T>());
}

template <typename T, bool Eager>
void paged_attention(const op::PagedAttention& a) {
  use_device_of(a.out);
  const PagedAttentionArgs args = paged_attention_args(a);
  const Tensor workspace = workspace_beside(
      a.out, launch::paged_attention_workspace<T>(args, Eager) * static_cast<int64_t>(sizeof(float)));
  launch::paged_attention<T>(args, Eager, static_cast<float*>(workspace_pointer(workspace)));
}

template <typename T>
bool paged_attention_lse_takes(const op::PagedAttentionLse& a) {
  return launch::paged_attention_keeps_lse<T>(paged_attention_args(a));
}

template <typename T>
void paged_attention_lse(const op::PagedAttentionLse& a) {
  use_device_of(a.out);
  launch::paged_attention<T>(paged_attention_args(a), false, nullptr);  // the tiles, which need no workspace
}

template <typename T>
bool qkv_attention_takes(const op::QkvAttention& a) {
  return launch::qkv_attention_takes<T>(qkv_rope_cache_args(a.rope_cache()),
                                        paged_attention_args(a.attention()));
}

template <typename T>
void qkv_attention(const op::QkvAttention& a) {
  use_device_of(a.out);
  const PagedAttentionArgs args = paged_attention_args(a.attention());
  const Tensor workspace = workspace_beside(
      a.out, launch::paged_attention_workspace<T>(args, false) * static_cast<int64_t>(sizeof(float)));
  launch::qkv_attention<T>(qkv_rope_cache_args(a.rope_cache()), args,
                           static_cast<float*>(workspace_pointer(workspace)));
}

}  // namespace

void register_kernels(KernelRegistry& r) {
  constexpr DeviceType device = DeviceType::cuda;
  for (DType d : kComputeDTypes) {
    r.add<op::Embedding>(device, d, "default", {.run = embedding, .is_default = true});
    r.add<op::GatherRows>(device, d, "default", {.run = gather_rows, .is_default = true});
    r.add<op::SplitColumns>(device, d, "default", {.run = split_columns, .is_default = true});
    r.add<op::KvCacheWrite>(device, d, "default", {.run = kv_cache_write, .is_default = true});
    visit_float(d, [&]<typename T>() {
      r.add<op::Add>(device, d, "default", {.run = add<T>, .is_default = true});
      r.add<op::Cast>(device, d, "default", {.run = cast<T>, .is_default = true});
      r.add<op::ArgmaxRows>(device, d, "default", {.run = argmax_rows<T>, .is_default = true});
      r.add<op::SampleRows>(device, d, "default", {.run = sample_rows<T>, .is_default = true});
      r.add<op::RmsNorm>(device, d, "default", {.run = rms_norm<T>, .is_default = true});
      r.add<op::AddRmsNorm>(device, d, "fused", {.run = add_rms_norm_fused<T>});
      r.add<op::Rope>(device, d, "default", {.run = rope<T>, .is_default = true});
      r.add<op::QkvRopeCache>(device, d, "default", {.run = qkv_rope_cache<T>, .is_default = true});
      r.add<op::QkvRope>(device, d, "default", {.run = qkv_rope<T>, .is_default = true});
      r.add<op::SiluMul>(device, d, "default", {.run = silu_mul<T>, .is_default = true});
      r.add<op::PagedAttention>(device, d, "flash", {.run = paged_attention<T, false>, .is_default = true});
      r.add<op::PagedAttention>(device, d, "eager", {.run = paged_attention<T, true>});
      if constexpr (sizeof(T) == 2) {  // the tile kernels keep the log-sum-exp, and they take 16-bit types
        r.add<op::PagedAttentionLse>(
            device, d, "flash",
            {.run = paged_attention_lse<T>, .supports = paged_attention_lse_takes<T>, .is_default = true});
      }
      r.add<op::QkvAttention>(
          device, d, "flash",
          {.run = qkv_attention<T>, .supports = qkv_attention_takes<T>, .is_default = true});
    });
  }
  register_linear_kernels(r);
  register_training_kernels(r);
}

}  // namespace tfm::cuda

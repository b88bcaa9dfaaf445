// Ops unpacked into raw pointers for the kernels of backends whose memory is addressed by pointers (cpu,
// cuda), so that each of those backends unpacks them the same way.
#pragma once

#include <vector>

#include "tfm/backend/op_set.h"
#include "tfm/backend/paged_attention_args.h"

namespace tfm {

// A tensor's elements, or null where the op leaves it undefined (an optional bias, norm weight, gradient).
template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
inline void* raw_or_null(const Tensor& t) {
  return t.defined() ? t.raw() : nullptr;
}

inline PagedAttentionArgs paged_attention_args(const op::PagedAttention& a) {
  PagedAttentionArgs p{};
  p.q = a.q.raw();
  p.cache_k = a.cache_k.raw();
  p.cache_v = a.cache_v.raw();
  p.query_start = a.meta.query_start.data<int32_t>();
  p.context_lens = a.meta.context_lens.data<int32_t>();
  p.block_tables = a.meta.block_tables.data<int32_t>();
  p.positions = a.meta.positions.data<int32_t>();
  p.num_rows = a.q.size(0);
  p.num_seqs = a.meta.context_lens.size(0);
  p.heads = a.q.size(1);
  p.kv_heads = a.cache_k.size(2);
  p.head_dim = a.q.size(2);
  p.block_size = a.cache_k.size(1);
  p.max_blocks = a.meta.block_tables.size(1);
  p.scale = a.scale;
  p.window = a.window;
  p.out = a.out.raw();
  return p;
}

inline PagedAttentionArgs paged_attention_args(const op::PagedAttentionLse& a) {
  PagedAttentionArgs p = paged_attention_args(a.attention());
  p.lse = a.lse.data<float>();
  return p;
}

// The outputs of split_columns as pointers and widths (elements per row).
struct ColumnSplit {
  std::vector<void*> outs;
  std::vector<int64_t> widths;
};

inline ColumnSplit column_split(const op::SplitColumns& a) {
  ColumnSplit s;
  const int64_t rows = a.x.size(0);
  for (Tensor* o : a.outs) {
    s.outs.push_back(o->raw());
    s.widths.push_back(rows ? o->numel() / rows : 0);
  }
  return s;
}

}  // namespace tfm

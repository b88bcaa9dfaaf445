// Tensors unpacked into raw pointers for the kernels of backends whose memory is addressed by pointers (cpu,
// cuda), so that each of those backends unpacks them the same way.
#pragma once

#include <span>
#include <vector>

#include "tfm/backend/op_kernels.h"
#include "tfm/backend/paged_attention_args.h"

namespace tfm {

inline PagedAttentionArgs paged_attention_args(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v,
                                               const AttentionMetadata& meta, float scale, int64_t window,
                                               Tensor& out) {
  PagedAttentionArgs a{};
  a.q = q.data<float>();
  a.cache_k = cache_k.data<float>();
  a.cache_v = cache_v.data<float>();
  a.query_start = meta.query_start.data<int32_t>();
  a.context_lens = meta.context_lens.data<int32_t>();
  a.block_tables = meta.block_tables.data<int32_t>();
  a.positions = meta.positions.data<int32_t>();
  a.num_rows = q.size(0);
  a.num_seqs = meta.context_lens.size(0);
  a.heads = q.size(1);
  a.kv_heads = cache_k.size(2);
  a.head_dim = q.size(2);
  a.block_size = cache_k.size(1);
  a.max_blocks = meta.block_tables.size(1);
  a.scale = scale;
  a.window = window;
  a.out = out.data<float>();
  return a;
}

// The outputs of split_columns as pointers and widths (columns per row).
struct ColumnSplit {
  std::vector<float*> outs;
  std::vector<int64_t> widths;
};

inline ColumnSplit column_split(std::span<Tensor* const> outs, int64_t rows) {
  ColumnSplit s;
  for (Tensor* o : outs) {
    s.outs.push_back(o->data<float>());
    s.widths.push_back(o->numel() / rows);
  }
  return s;
}

}  // namespace tfm

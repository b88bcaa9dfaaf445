// The op set the models use. Each op checks shapes and dtypes (a mismatch is a tfm::Error naming the op and
// the shapes), then runs the kernel of the tensors' device (backend/op_kernels.h describes each).
#pragma once

#include <cstdint>
#include <span>

#include "tfm/backend/op_kernels.h"
#include "tfm/core/tensor.h"

namespace tfm::ops {

void embedding(const Tensor& table, const Tensor& ids, Tensor& out);
void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y);
void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out);
void rope_(Tensor& x, const Tensor& cos, const Tensor& sin);
void silu_mul(const Tensor& gate_up, Tensor& out);
void add_(Tensor& x, const Tensor& y);
void split_columns(const Tensor& x, std::span<Tensor* const> outs);
void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out);

// The KV cache of one layer: (blocks, block_size, kv_heads, head_dim) for keys and for values.
struct LayerCache {
  Tensor key;
  Tensor value;
};

enum class AttentionImpl { eager, sdpa };

void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, LayerCache& cache);
void paged_attention(const Tensor& q, const LayerCache& cache, const AttentionMetadata& meta, float scale,
                     int64_t window, AttentionImpl impl, Tensor& out);

}  // namespace tfm::ops

#include "tfm/ops/ops.h"

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"

namespace tfm::ops {
namespace {

void expect(const Tensor& t, DType dtype, const char* op, const char* what) {
  check(t.defined() && t.dtype() == dtype && t.is_contiguous(), op, ": ", what, " must be contiguous ",
        dtype_name(dtype), ", got ", t.defined() ? t.str() : "nothing");
}

// The kernels of the device all of an op's tensors are on.
OpKernels& kernels(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Device device = (*tensors.begin())->device();
  for (const Tensor* t : tensors) {
    check(!t->defined() || t->device() == device, op, ": tensors on ", device.str(), " and ",
          t->device().str());
  }
  Backend* backend = find_backend(device.type);
  OpKernels* k = backend ? backend->kernels() : nullptr;
  check(k != nullptr, op, " has no kernel for ", device.str(), " yet");
  return *k;
}

}  // namespace

void embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  expect(table, DType::float32, "embedding", "table");
  expect(ids, DType::int32, "embedding", "ids");
  expect(out, DType::float32, "embedding", "out");
  check(ids.dim() == 1 && out.dim() == 2 && out.size(0) == ids.size(0) && out.size(1) == table.size(1),
        "embedding: out ", out.str(), " does not match ", ids.str(), " and ", table.str());
  kernels("embedding", {&table, &ids, &out}).embedding(table, ids, out);
}

void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  expect(x, DType::float32, "linear", "x");
  expect(w, DType::float32, "linear", "weight");
  expect(y, DType::float32, "linear", "y");
  check(x.dim() == 2 && w.dim() == 2 && w.size(1) == x.size(1) && y.dim() == 2 && y.size(0) == x.size(0) &&
            y.size(1) == w.size(0),
        "linear: shapes ", x.str(), " @ ", w.str(), "^T -> ", y.str(), " do not match");
  if (bias.defined()) {
    expect(bias, DType::float32, "linear", "bias");
    check(bias.dim() == 1 && bias.size(0) == w.size(0), "linear: bias ", bias.str(), " does not match ",
          w.str());
  }
  kernels("linear", {&x, &w, &bias, &y}).linear(x, w, bias, y);
}

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  expect(x, DType::float32, "rms_norm", "x");
  expect(weight, DType::float32, "rms_norm", "weight");
  expect(out, DType::float32, "rms_norm", "out");
  check(weight.dim() == 1 && x.size(-1) == weight.size(0) && out.shape() == x.shape(), "rms_norm: shapes ",
        x.str(), ", ", weight.str(), " -> ", out.str(), " do not match");
  kernels("rms_norm", {&x, &weight, &out}).rms_norm(x, weight, eps, out);
}

void rope_(Tensor& x, const Tensor& cos, const Tensor& sin) {
  expect(x, DType::float32, "rope", "x");
  expect(cos, DType::float32, "rope", "cos");
  expect(sin, DType::float32, "rope", "sin");
  check(x.dim() == 3 && cos.dim() == 2 && cos.shape() == sin.shape() && cos.size(0) == x.size(0) &&
            cos.size(1) <= x.size(2) && cos.size(1) % 2 == 0,
        "rope: shapes ", x.str(), ", ", cos.str(), " do not match");
  kernels("rope", {&x, &cos, &sin}).rope_(x, cos, sin);
}

void silu_mul(const Tensor& gate_up, Tensor& out) {
  expect(gate_up, DType::float32, "silu_mul", "gate_up");
  expect(out, DType::float32, "silu_mul", "out");
  check(gate_up.dim() == 2 && out.dim() == 2 && gate_up.size(0) == out.size(0) &&
            gate_up.size(1) == 2 * out.size(1),
        "silu_mul: shapes ", gate_up.str(), " -> ", out.str(), " do not match");
  kernels("silu_mul", {&gate_up, &out}).silu_mul(gate_up, out);
}

void add_(Tensor& x, const Tensor& y) {
  expect(x, DType::float32, "add", "x");
  expect(y, DType::float32, "add", "y");
  check(x.shape() == y.shape(), "add: shapes ", x.str(), " and ", y.str(), " differ");
  kernels("add", {&x, &y}).add_(x, y);
}

void split_columns(const Tensor& x, std::span<Tensor* const> outs) {
  expect(x, DType::float32, "split_columns", "x");
  check(x.dim() >= 1 && !outs.empty(), "split_columns: nothing to split");
  int64_t width = 0;
  for (Tensor* o : outs) {
    expect(*o, DType::float32, "split_columns", "output");
    check(o->size(0) == x.size(0) && o->device() == x.device(), "split_columns: output ", o->str(),
          " does not have the rows of ", x.str());
    width += o->numel() / std::max<int64_t>(x.size(0), 1);
  }
  check(x.numel() == x.size(0) * width, "split_columns: ", x.str(), " is not the outputs side by side");
  kernels("split_columns", {&x}).split_columns(x, outs);
}

void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  expect(x, DType::float32, "gather_rows", "x");
  expect(rows, DType::int32, "gather_rows", "rows");
  expect(out, DType::float32, "gather_rows", "out");
  check(x.dim() == 2 && rows.dim() == 1 && out.dim() == 2 && out.size(0) == rows.size(0) &&
            out.size(1) == x.size(1),
        "gather_rows: shapes ", x.str(), ", ", rows.str(), " -> ", out.str(), " do not match");
  kernels("gather_rows", {&x, &rows, &out}).gather_rows(x, rows, out);
}

void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, LayerCache& cache) {
  expect(k, DType::float32, "kv_cache_write", "k");
  expect(v, DType::float32, "kv_cache_write", "v");
  expect(slots, DType::int32, "kv_cache_write", "slots");
  check(k.dim() == 3 && v.shape() == k.shape() && slots.dim() == 1 && slots.size(0) == k.size(0) &&
            cache.key.dim() == 4 && cache.key.size(2) == k.size(1) && cache.key.size(3) == k.size(2) &&
            cache.value.shape() == cache.key.shape(),
        "kv_cache_write: shapes ", k.str(), ", ", slots.str(), " -> ", cache.key.str(), " do not match");
  kernels("kv_cache_write", {&k, &v, &slots, &cache.key, &cache.value})
      .kv_cache_write(k, v, slots, cache.key, cache.value);
}

void paged_attention(const Tensor& q, const LayerCache& cache, const AttentionMetadata& meta, float scale,
                     int64_t window, AttentionImpl impl, Tensor& out) {
  expect(q, DType::float32, "attention", "q");
  expect(out, DType::float32, "attention", "out");
  for (const Tensor* t : {&meta.query_start, &meta.context_lens, &meta.block_tables, &meta.positions}) {
    expect(*t, DType::int32, "attention", "metadata");
  }
  const int64_t S = meta.context_lens.size(0);
  check(q.dim() == 3 && out.shape() == q.shape() && cache.key.dim() == 4 && cache.key.size(3) == q.size(2) &&
            q.size(1) % cache.key.size(2) == 0,
        "attention: shapes ", q.str(), ", cache ", cache.key.str(), " -> ", out.str(), " do not match");
  check(meta.query_start.size(0) == S + 1 && meta.positions.size(0) == q.size(0) &&
            meta.block_tables.dim() == 2 && meta.block_tables.size(0) == S,
        "attention: metadata does not describe ", q.size(0), " rows");
  kernels("attention", {&q, &cache.key, &cache.value, &meta.query_start, &out})
      .paged_attention(q, cache.key, cache.value, meta, scale, window, impl == AttentionImpl::eager, out);
}

}  // namespace tfm::ops

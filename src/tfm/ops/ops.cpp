#include "tfm/ops/ops.h"

#include <vector>

#include "tfm/backend/cpu/kernels.h"
#include "tfm/core/error.h"

namespace tfm::ops {
namespace {

void expect_f32(const Tensor& t, const char* op, const char* what) {
  check(t.dtype() == DType::float32 && t.is_contiguous(), op, ": ", what, " must be contiguous float32, got ",
        t.str());
}

// The one place that knows which devices have kernels. Other devices arrive with their backends.
void expect_cpu(const Tensor& t, const char* op) {
  check(t.device().type == DeviceType::cpu, op, " has no kernel for ", t.device().str(), " yet");
}

}  // namespace

void embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  expect_f32(table, "embedding", "table");
  expect_f32(out, "embedding", "out");
  check(ids.dtype() == DType::int32 && ids.dim() == 1, "embedding: ids must be int32 (T), got ", ids.str());
  check(out.dim() == 2 && out.size(0) == ids.size(0) && out.size(1) == table.size(1), "embedding: out ", out.str(),
        " does not match ", ids.str(), " and ", table.str());
  expect_cpu(table, "embedding");
  const int64_t V = table.size(0);
  for (int64_t t = 0; t < ids.size(0); ++t) {
    const int32_t id = ids.data<int32_t>()[t];
    check(id >= 0 && id < V, "token id ", id, " is outside the vocabulary (size ", V, ")");
  }
  cpu::embedding(table.data<float>(), ids.data<int32_t>(), ids.size(0), table.size(1), out.data<float>());
}

void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  expect_f32(x, "linear", "x");
  expect_f32(w, "linear", "weight");
  expect_f32(y, "linear", "y");
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  check(x.dim() == 2 && w.dim() == 2 && w.size(1) == K && y.dim() == 2 && y.size(0) == M && y.size(1) == N,
        "linear: shapes ", x.str(), " @ ", w.str(), "^T -> ", y.str(), " do not match");
  check(!bias.defined() || (bias.dim() == 1 && bias.size(0) == N), "linear: bias ", bias.str(), " does not match");
  expect_cpu(x, "linear");
  cpu::linear(x.data<float>(), w.data<float>(), bias.defined() ? bias.data<float>() : nullptr, M, K, N,
              y.data<float>());
}

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  expect_f32(x, "rms_norm", "x");
  expect_f32(out, "rms_norm", "out");
  expect_f32(weight, "rms_norm", "weight");
  const int64_t D = weight.size(0);
  check(x.size(-1) == D && out.shape() == x.shape(), "rms_norm: shapes ", x.str(), ", ", weight.str(), " -> ",
        out.str(), " do not match");
  expect_cpu(x, "rms_norm");
  cpu::rms_norm(x.data<float>(), weight.data<float>(), x.numel() / D, D, eps, out.data<float>());
}

void rope_(Tensor& x, const Tensor& cos, const Tensor& sin) {
  expect_f32(x, "rope", "x");
  expect_f32(cos, "rope", "cos");
  expect_f32(sin, "rope", "sin");
  check(x.dim() == 3 && cos.dim() == 2 && cos.shape() == sin.shape() && cos.size(0) == x.size(0) &&
            cos.size(1) <= x.size(2) && cos.size(1) % 2 == 0,
        "rope: shapes ", x.str(), ", ", cos.str(), " do not match");
  expect_cpu(x, "rope");
  cpu::rope(x.data<float>(), cos.data<float>(), sin.data<float>(), x.size(0), x.size(1), x.size(2), cos.size(1));
}

void silu_mul(const Tensor& gate_up, Tensor& out) {
  expect_f32(gate_up, "silu_mul", "gate_up");
  expect_f32(out, "silu_mul", "out");
  check(gate_up.dim() == 2 && out.dim() == 2 && gate_up.size(0) == out.size(0) && gate_up.size(1) == 2 * out.size(1),
        "silu_mul: shapes ", gate_up.str(), " -> ", out.str(), " do not match");
  expect_cpu(out, "silu_mul");
  cpu::silu_mul(gate_up.data<float>(), out.size(0), out.size(1), out.data<float>());
}

void add_(Tensor& x, const Tensor& y) {
  expect_f32(x, "add", "x");
  expect_f32(y, "add", "y");
  check(x.shape() == y.shape(), "add: shapes ", x.str(), " and ", y.str(), " differ");
  expect_cpu(x, "add");
  cpu::add_inplace(x.data<float>(), y.data<float>(), x.numel());
}

void split_columns(const Tensor& x, std::span<Tensor* const> outs) {
  expect_f32(x, "split_columns", "x");
  const int64_t T = x.size(0);
  std::vector<float*> dst;
  std::vector<int64_t> widths;
  int64_t total = 0;
  for (Tensor* o : outs) {
    expect_f32(*o, "split_columns", "output");
    check(o->size(0) == T, "split_columns: output ", o->str(), " does not have ", T, " rows");
    dst.push_back(o->data<float>());
    widths.push_back(o->numel() / T);
    total += widths.back();
  }
  check(x.numel() == T * total, "split_columns: ", x.str(), " is not the outputs side by side");
  expect_cpu(x, "split_columns");
  cpu::split_columns(x.data<float>(), T, dst.data(), widths.data(), static_cast<int64_t>(dst.size()));
}

void gather_rows(const Tensor& x, std::span<const int32_t> rows, Tensor& out) {
  expect_f32(x, "gather_rows", "x");
  expect_f32(out, "gather_rows", "out");
  const int64_t R = static_cast<int64_t>(rows.size());
  check(x.dim() == 2 && out.dim() == 2 && out.size(0) == R && out.size(1) == x.size(1), "gather_rows: shapes ",
        x.str(), " -> ", out.str(), " do not match");
  for (int32_t r : rows) check(r >= 0 && r < x.size(0), "gather_rows: row ", r, " outside ", x.str());
  expect_cpu(x, "gather_rows");
  cpu::gather_rows(x.data<float>(), x.size(1), rows.data(), R, out.data<float>());
}

void kv_cache_write(const Tensor& k, const Tensor& v, const AttentionMetadata& meta, LayerCache& cache) {
  expect_f32(k, "kv_cache_write", "k");
  expect_f32(v, "kv_cache_write", "v");
  const int64_t T = k.size(0);
  const int64_t kv_dim = k.numel() / std::max<int64_t>(T, 1);
  const int64_t slots = cache.key.numel() / kv_dim;
  check(v.shape() == k.shape() && static_cast<int64_t>(meta.slots.size()) == T, "kv_cache_write: ", T,
        " rows but ", meta.slots.size(), " slots");
  for (int32_t s : meta.slots) check(s >= 0 && s < slots, "kv_cache_write: slot ", s, " outside the cache");
  expect_cpu(k, "kv_cache_write");
  cpu::kv_cache_write(k.data<float>(), v.data<float>(), meta.slots.data(), T, kv_dim, cache.key.data<float>(),
                      cache.value.data<float>());
}

void paged_attention(const Tensor& q, const LayerCache& cache, const AttentionMetadata& meta, float scale,
                     int64_t window, AttentionImpl impl, Tensor& out) {
  expect_f32(q, "attention", "q");
  expect_f32(out, "attention", "out");
  check(q.dim() == 3 && out.shape() == q.shape() && cache.key.dim() == 4 && cache.key.size(3) == q.size(2),
        "attention: shapes ", q.str(), ", cache ", cache.key.str(), " -> ", out.str(), " do not match");
  const int64_t S = static_cast<int64_t>(meta.context_lens.size());
  check(static_cast<int64_t>(meta.query_start.size()) == S + 1 && meta.query_start[S] == q.size(0) &&
            static_cast<int64_t>(meta.positions.size()) == q.size(0) &&
            static_cast<int64_t>(meta.block_tables.size()) == S * meta.max_blocks,
        "attention: metadata does not describe ", q.size(0), " rows");
  check(q.size(1) % cache.key.size(2) == 0, "attention: ", q.size(1), " heads over ", cache.key.size(2),
        " kv heads");
  expect_cpu(q, "attention");
  cpu::PagedAttentionArgs a{};
  a.q = q.data<float>();
  a.cache_k = cache.key.data<float>();
  a.cache_v = cache.value.data<float>();
  a.query_start = meta.query_start.data();
  a.context_lens = meta.context_lens.data();
  a.block_tables = meta.block_tables.data();
  a.positions = meta.positions.data();
  a.num_seqs = S;
  a.heads = q.size(1);
  a.kv_heads = cache.key.size(2);
  a.head_dim = q.size(2);
  a.block_size = cache.key.size(1);
  a.max_blocks = meta.max_blocks;
  a.scale = scale;
  a.window = window;
  a.out = out.data<float>();
  cpu::paged_attention(a, impl == AttentionImpl::eager);
}

}  // namespace tfm::ops

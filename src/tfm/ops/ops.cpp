#include "tfm/ops/ops.h"

#include <algorithm>

#include "tfm/backend/kernel_registry.h"
#include "tfm/core/error.h"
#include "tfm/core/floats.h"
#include "tfm/ops/op_profile.h"

namespace tfm::ops {
namespace {

// Checks format their message only on failure (`if (!ok) throw_error(...)` rather than check(ok, ...)): an op
// runs per layer per step, and building the message every time costs more than a small kernel.

void expect(const Tensor& t, DType dtype, std::string_view op, const char* what) {
  if (!(t.defined() && t.dtype() == dtype && t.is_contiguous()))
    throw_error(op, ": ", what, " must be contiguous ", dtype_name(dtype), ", got ",
                t.defined() ? t.str() : "nothing");
}

DType compute_dtype(DType d, std::string_view op) {
  check(std::find(std::begin(kComputeDTypes), std::end(kComputeDTypes), d) != std::end(kComputeDTypes), op,
        ": ", dtype_name(d), " is not a dtype models compute in (float32, bfloat16, float16)");
  return d;
}

// The op's dtype, one models compute in.
template <typename Op>
DType compute_dtype(const Op& a) {
  return compute_dtype(a.dtype(), Op::name);
}

// The device all of `a`'s tensors are on.
template <typename Op>
Device device_of(const Op& a) {
  const auto tensors = a.tensors();
  const Device device = tensors[0]->device();
  for (const Tensor* t : tensors) {
    if (!(!t->defined() || t->device() == device))
      throw_error(Op::name, ": tensors on ", device.str(), " and ", t->device().str());
  }
  return device;
}

// run(), timed as `a` on `device` where op profiling is on.
template <typename Op, typename Run>
void timed(const Op& a, std::string_view variant, Device device, Run&& run) {
  if (op_profile_enabled()) {
    profile_op(Op::name, variant, a.tensors(), device, run);
    return;
  }
  run();
}

// Runs `a` on the device all of its tensors are on.
template <typename Op>
void dispatch(const Op& a, std::string_view variant = {}) {
  const Device device = device_of(a);
  timed(a, variant, device, [&] { kernel_registry().run(a, device.type, variant); });
}

// Runs `a` with `variant`'s kernel where there is one that takes the arguments (no other variant stands in);
// false, having done nothing, elsewhere: an optional op whose caller has another way.
template <typename Op>
bool dispatch_if_taken(const Op& a, std::string_view variant) {
  const Device device = device_of(a);
  const Kernel<Op>* kernel = kernel_registry().find<Op>(device.type, a.dtype(), variant);
  if (!kernel || (kernel->supports && !kernel->supports(a))) return false;
  timed(a, variant, device, [&] { kernel->run(a); });
  return true;
}

// x (M, K) @ w (N, K)^T -> y (M, N), all in the dtype d.
void expect_product(std::string_view op, const Tensor& x, const Tensor& w, const Tensor& y, DType d) {
  expect(x, d, op, "x");
  expect(w, d, op, "weight");
  expect(y, d, op, "y");
  if (!(x.dim() == 2 && w.dim() == 2 && w.size(1) == x.size(1) && y.dim() == 2 && y.size(0) == x.size(0) &&
        y.size(1) == w.size(0)))
    throw_error(op, ": shapes ", x.str(), " @ ", w.str(), "^T -> ", y.str(), " do not match");
}

}  // namespace

std::vector<std::string_view> ops_without_kernels(DeviceType device, DType dtype) {
  std::vector<std::string_view> missing;
  const KernelRegistry& r = kernel_registry();
  op::for_each_op([&]<typename Op>() {
    if (!op::is_optional<Op>() && !r.find<Op>(device, dtype)) missing.push_back(Op::name);
  });
  return missing;
}

bool argmax_rows_runs_on(DeviceType device, DType dtype) {
  return kernel_registry().find<op::ArgmaxRows>(device, dtype) != nullptr;
}

void argmax_rows(const Tensor& x, Tensor& ids) {
  const op::ArgmaxRows a{x, ids};
  const DType d = compute_dtype(a);
  expect(x, d, a.name, "x");
  expect(ids, DType::int32, a.name, "ids");
  if (!(x.dim() == 2 && x.size(1) > 0 && ids.dim() == 1 && ids.size(0) == x.size(0)))
    throw_error("argmax_rows: shapes ", x.str(), " -> ", ids.str(), " do not match");
  dispatch(a);
}

bool sample_rows_runs_on(DeviceType device, DType dtype) {
  return kernel_registry().find<op::SampleRows>(device, dtype) != nullptr;
}

void sample_rows(const Tensor& logits, const Tensor& settings, const Tensor& penalties, Tensor& ids) {
  const op::SampleRows a{logits, settings, penalties, ids};
  const DType d = compute_dtype(a);
  expect(logits, d, a.name, "logits");
  expect(settings, DType::int32, a.name, "settings");
  expect(penalties, DType::int32, a.name, "penalties");
  expect(ids, DType::int32, a.name, "ids");
  const int64_t R = logits.dim() == 2 ? logits.size(0) : -1;
  if (!(R >= 0 && logits.size(1) > 0 && settings.dim() == 2 && settings.size(0) == R &&
        settings.size(1) == kSampleSettingsWords && penalties.dim() == 2 && penalties.size(1) == 2 &&
        ids.dim() == 1 && ids.size(0) == R))
    throw_error("sample_rows: shapes ", logits.str(), ", ", settings.str(), ", ", penalties.str(), " -> ",
                ids.str(), " do not match");
  dispatch(a);
}

void embedding(const Tensor& table, const Tensor& ids, Tensor& out, std::string_view variant) {
  const op::Embedding a{table, ids, out};
  const DType d = compute_dtype(a);
  expect(table, d, a.name, "table");
  expect(ids, DType::int32, a.name, "ids");
  expect(out, d, a.name, "out");
  if (!(table.dim() == 2 && ids.dim() == 1 && out.dim() == 2 && out.size(0) == ids.size(0) &&
        out.size(1) == table.size(1)))
    throw_error("embedding: out ", out.str(), " does not match ", ids.str(), " and ", table.str());
  dispatch(a, variant);
}

void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y, std::string_view variant) {
  const op::Linear a{x, w, bias, y};
  const DType d = compute_dtype(a);
  expect_product(a.name, x, w, y, d);
  if (bias.defined()) {
    expect(bias, d, a.name, "bias");
    if (!(bias.dim() == 1 && bias.size(0) == w.size(0)))
      throw_error("linear: bias ", bias.str(), " does not match ", w.str());
  }
  dispatch(a, variant);
}

void linear_add(const Tensor& x, const Tensor& w, Tensor& y, bool w_by_columns) {
  const op::LinearAdd a{x, w, y, w_by_columns};
  const DType d = compute_dtype(a);
  if (w_by_columns) {
    expect(x, d, a.name, "x");
    expect(w, d, a.name, "weight");
    expect(y, d, a.name, "y");
    if (!(x.dim() == 2 && w.dim() == 2 && w.size(0) == x.size(1) && y.dim() == 2 && y.size(0) == x.size(0) &&
          y.size(1) == w.size(1)))
      throw_error(a.name, ": shapes ", x.str(), " @ ", w.str(), " -> ", y.str(), " do not match");
  } else {
    expect_product(a.name, x, w, y, d);
  }
  dispatch(a);
}

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, std::string_view variant) {
  const op::RmsNorm a{x, weight, eps, out};
  const DType d = compute_dtype(a);
  expect(x, d, a.name, "x");
  expect(weight, d, a.name, "weight");
  expect(out, d, a.name, "out");
  if (!(weight.dim() == 1 && x.dim() >= 1 && x.size(-1) == weight.size(0) && out.shape() == x.shape()))
    throw_error("rms_norm: shapes ", x.str(), ", ", weight.str(), " -> ", out.str(), " do not match");
  dispatch(a, variant);
}

void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps, Tensor& out,
                  std::string_view variant) {
  const op::AddRmsNorm a{residual, x, weight, eps, out};
  const DType d = compute_dtype(a);
  expect(residual, d, a.name, "residual");
  expect(x, d, a.name, "x");
  expect(weight, d, a.name, "weight");
  expect(out, d, a.name, "out");
  if (!(weight.dim() == 1 && residual.dim() == 2 && residual.size(1) == weight.size(0) &&
        x.shape() == residual.shape() && out.shape() == residual.shape()))
    throw_error("add_rms_norm: shapes ", residual.str(), " + ", x.str(), ", ", weight.str(), " -> ",
                out.str(), " do not match");
  dispatch(a, variant);
}

bool norm_linear_runs_on(DeviceType device, DType dtype, std::string_view variant) {
  return kernel_registry().find<op::NormLinear>(device, dtype, variant) != nullptr;
}

bool norm_linear(const Tensor& residual, const Tensor& x, const Tensor& norm_weight, float eps, const Tensor& w,
                 const Tensor& bias, bool gated, Tensor& residual_out, Tensor& y, std::string_view variant) {
  const op::NormLinear a{residual, x, norm_weight, eps, w, bias, gated, residual_out, y};
  const DType d = compute_dtype(a);
  expect(residual, d, a.name, "residual");
  expect(w, d, a.name, "w");
  expect(y, d, a.name, "y");
  if (norm_weight.defined()) expect(norm_weight, d, a.name, "norm weight");
  if (x.defined()) {
    if (!norm_weight.defined())
      throw_error("norm_linear: a residual add (x) needs the norm after it (norm_weight)");
    expect(x, d, a.name, "x");
    expect(residual_out, d, a.name, "residual_out");
  }
  if (bias.defined()) expect(bias, d, a.name, "bias");
  const bool matrices = residual.dim() == 2 && (!norm_weight.defined() || norm_weight.dim() == 1) &&
                        w.dim() == 2 && y.dim() == 2;
  const int64_t M = matrices ? residual.size(0) : 0, K = matrices ? residual.size(1) : 0;
  const int64_t N = matrices ? w.size(0) : 0;
  if (!(matrices && (!norm_weight.defined() || norm_weight.size(0) == K) && w.size(1) == K &&
        (!x.defined() || (x.shape() == residual.shape() && residual_out.shape() == residual.shape())) &&
        (!bias.defined() || bias.shape() == Shape{N}) && (!gated || N % 2 == 0) && y.size(0) == M &&
        y.size(1) == (gated ? N / 2 : N)))
    throw_error("norm_linear: shapes ", residual.str(), " + ", x.str(), ", ", norm_weight.str(), ", ", w.str(),
                gated ? " gated" : "", " -> ", residual_out.str(), ", ", y.str(), " do not match");
  const Device device = device_of(a);
  const Kernel<op::NormLinear>* kernel =
      M <= op::NormLinear::kMaxRows ? kernel_registry().choose(a, device.type, variant) : nullptr;
  if (!kernel) return false;
  timed(a, variant, device, [&] { kernel->run(a); });
  return true;
}

void rope_(Tensor& x, const Tensor& cos, const Tensor& sin, std::string_view variant) {
  const op::Rope a{x, cos, sin};
  const DType d = compute_dtype(a);
  expect(x, d, a.name, "x");
  expect(cos, d, a.name, "cos");
  expect(sin, d, a.name, "sin");
  if (!(x.dim() == 3 && cos.dim() == 2 && cos.shape() == sin.shape() && cos.size(0) == x.size(0) &&
        cos.size(1) <= x.size(2) && cos.size(1) % 2 == 0))
    throw_error("rope: shapes ", x.str(), ", ", cos.str(), " do not match");
  dispatch(a, variant);
}

void silu_mul(const Tensor& gate_up, Tensor& out, std::string_view variant) {
  const op::SiluMul a{gate_up, out};
  const DType d = compute_dtype(a);
  expect(gate_up, d, a.name, "gate_up");
  expect(out, d, a.name, "out");
  if (!(gate_up.dim() == 2 && out.dim() == 2 && gate_up.size(0) == out.size(0) &&
        gate_up.size(1) == 2 * out.size(1)))
    throw_error("silu_mul: shapes ", gate_up.str(), " -> ", out.str(), " do not match");
  dispatch(a, variant);
}

void add_(Tensor& x, const Tensor& y) {
  const op::Add a{x, y};
  const DType d = compute_dtype(a);
  expect(x, d, a.name, "x");
  expect(y, d, a.name, "y");
  if (!(x.shape() == y.shape())) throw_error("add: shapes ", x.str(), " and ", y.str(), " differ");
  dispatch(a);
}

void cast(const Tensor& x, Tensor& out) {
  const op::Cast a{x, out};
  expect(x, compute_dtype(a), a.name, "x");
  expect(out, compute_dtype(out.dtype(), a.name), a.name, "out");
  if (!(x.shape() == out.shape())) throw_error("cast: shapes ", x.str(), " and ", out.str(), " differ");
  dispatch(a);
}

void split_columns(const Tensor& x, std::span<Tensor* const> outs) {
  const op::SplitColumns a{x, outs};
  const DType d = compute_dtype(a);
  expect(x, d, a.name, "x");
  check(x.dim() >= 1 && !outs.empty() && outs.size() <= op::SplitColumns::kMaxOutputs, "split_columns: 1 to ",
        op::SplitColumns::kMaxOutputs, " outputs, got ", outs.size());
  int64_t width = 0;
  for (Tensor* o : outs) {
    expect(*o, d, a.name, "output");
    if (!(o->dim() >= 1 && o->size(0) == x.size(0) && o->device() == x.device()))
      throw_error("split_columns: output ", o->str(), " does not have the rows of ", x.str());
    width += o->numel() / std::max<int64_t>(x.size(0), 1);
  }
  if (!(x.numel() == x.size(0) * width))
    throw_error("split_columns: ", x.str(), " is not the outputs side by side");
  dispatch(a);
}

void concat_columns(std::span<const Tensor* const> ins, Tensor& out) {
  const op::ConcatColumns a{ins, out};
  const DType d = compute_dtype(a);
  expect(out, d, a.name, "out");
  check(out.dim() == 2 && !ins.empty() && ins.size() <= op::SplitColumns::kMaxOutputs,
        "concat_columns: 1 to ", op::SplitColumns::kMaxOutputs, " inputs into a matrix, got ", ins.size());
  int64_t width = 0;
  for (const Tensor* in : ins) {
    expect(*in, d, a.name, "input");
    if (!(in->dim() >= 1 && in->size(0) == out.size(0) && in->device() == out.device()))
      throw_error("concat_columns: input ", in->str(), " does not have the rows of ", out.str());
    width += in->numel() / std::max<int64_t>(out.size(0), 1);
  }
  if (!(out.size(1) == width)) throw_error("concat_columns: ", out.str(), " is not the inputs side by side");
  dispatch(a);
}

void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  if (x.dtype() == DType::int32 && out.dtype() == DType::int32) {
    // Every device's gather moves bits without reading them: int32 rows travel as float32 words.
    const auto words = [](const Tensor& t) { return Tensor(t.storage(), t.shape(), DType::float32, t.offset()); };
    Tensor out_words = words(out);
    gather_rows(words(x), rows, out_words);
    return;
  }
  const op::GatherRows a{x, rows, out};
  const DType d = compute_dtype(a);
  expect(x, d, a.name, "x");
  expect(rows, DType::int32, a.name, "rows");
  expect(out, d, a.name, "out");
  if (!(x.dim() == 2 && rows.dim() == 1 && out.dim() == 2 && out.size(0) == rows.size(0) &&
        out.size(1) == x.size(1)))
    throw_error("gather_rows: shapes ", x.str(), ", ", rows.str(), " -> ", out.str(), " do not match");
  dispatch(a);
}

void add_scaled_columns_(std::span<const op::ScaledColumns> blocks, bool accumulate) {
  if (blocks.size() > op::AddScaledColumns::kMaxBlocks) {
    add_scaled_columns_(blocks.first(op::AddScaledColumns::kMaxBlocks), accumulate);
    add_scaled_columns_(blocks.subspan(op::AddScaledColumns::kMaxBlocks), accumulate);
    return;
  }
  check(!blocks.empty(), "add_scaled_columns_ of no blocks");
  const op::AddScaledColumns a{blocks, accumulate};
  const DType d = compute_dtype(a);
  for (const op::ScaledColumns& b : blocks) {
    expect(b.out, d, a.name, "out");
    expect(b.x, d, a.name, "x");
    check(b.out.dim() == 2 && b.x.dim() == 2 && b.x.size(0) == b.out.size(0) && b.out_column >= 0 &&
              b.x_column >= 0 && b.width >= 0 && b.out_column + b.width <= b.out.size(1) &&
              b.x_column + b.width <= b.x.size(1),
          "add_scaled_columns_: columns [", b.x_column, ", ", b.x_column + b.width, ") of ", b.x.str(),
          " into [", b.out_column, ", ", b.out_column + b.width, ") of ", b.out.str(), " do not fit");
  }
  dispatch(a);
}

void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& cache_k, Tensor& cache_v,
                    std::string_view variant) {
  const op::KvCacheWrite a{k, v, slots, cache_k, cache_v};
  const DType d = compute_dtype(a);
  expect(k, d, a.name, "k");
  expect(v, d, a.name, "v");
  expect(slots, DType::int32, a.name, "slots");
  expect(cache_k, d, a.name, "key cache");
  expect(cache_v, d, a.name, "value cache");
  if (!(k.dim() == 3 && v.shape() == k.shape() && slots.dim() == 1 && slots.size(0) == k.size(0) &&
        cache_k.dim() == 4 && cache_k.size(2) == k.size(1) && cache_k.size(3) == k.size(2) &&
        cache_v.shape() == cache_k.shape()))
    throw_error("kv_cache_write: shapes ", k.str(), ", ", slots.str(), " -> ", cache_k.str(),
                " do not match");
  dispatch(a, variant);
}

bool qkv_rope_cache_runs_on(DeviceType device, DType dtype) {
  return kernel_registry().find<op::QkvRopeCache>(device, dtype) != nullptr;
}

namespace {

// The fused projection's output and what makes attention's inputs from it (qkv_rope_cache's, qkv_rope's and
// qkv_attention's, and qkv_rope_backward's), for queries shaped as `q` (T, heads, D) and kv_heads k and v
// heads.
void check_qkv_inputs(std::string_view op, DType d, const Tensor& qkv, const Tensor& q_norm,
                      const Tensor& k_norm, const Tensor& cos, const Tensor& sin, const Tensor& q,
                      int64_t kv_heads) {
  for (const auto& [t, what] : {std::pair{&qkv, "qkv"}, {&cos, "cos"}, {&sin, "sin"}})
    expect(*t, d, op, what);
  if (q.dim() != 3) throw_error(op, ": q ", q.str(), " is not (T, heads, head_dim)");
  const int64_t T = q.size(0), heads = q.size(1), D = q.size(2);
  if (!(qkv.dim() == 2 && qkv.size(0) == T && qkv.size(1) == (heads + 2 * kv_heads) * D))
    throw_error(op, ": qkv ", qkv.str(), " does not match q ", q.str(), " and ", kv_heads, " kv heads");
  if (!(cos.dim() == 2 && cos.shape() == sin.shape() && cos.size(0) == T && cos.size(1) <= D &&
        cos.size(1) % 2 == 0))
    throw_error(op, ": cos ", cos.str(), " does not match q ", q.str());
  for (const Tensor* norm : {&q_norm, &k_norm}) {
    if (!norm->defined()) continue;
    expect(*norm, d, op, "norm weight");
    if (!(norm->dim() == 1 && norm->size(0) == D))
      throw_error(op, ": norm weight ", norm->str(), " is not (", D, ")");
  }
}

// The paged cache and slots that qkv_rope_cache and qkv_attention write the k and v heads of `q`'s rows to.
void check_qkv_cache(std::string_view op, DType d, const Tensor& slots, const Tensor& q,
                     const Tensor& cache_k, const Tensor& cache_v) {
  expect(cache_k, d, op, "cache_k");
  expect(cache_v, d, op, "cache_v");
  expect(slots, DType::int32, op, "slots");
  if (!(q.dim() == 3 && cache_k.dim() == 4 && cache_k.shape() == cache_v.shape() &&
        cache_k.size(3) == q.size(2) && slots.dim() == 1 && slots.size(0) == q.size(0)))
    throw_error(op, ": q ", q.str(), ", slots ", slots.str(), " and the cache ", cache_k.str(),
                " do not match");
}

// A float32 value for each (row, head) of the queries `q` (T, heads, D): the attention rows' log-sum-exp.
void expect_row_stats(std::string_view op, const Tensor& lse, const Tensor& q) {
  expect(lse, DType::float32, op, "lse");
  if (!(lse.dim() == 2 && q.dim() == 3 && lse.size(0) == q.size(0) && lse.size(1) == q.size(1)))
    throw_error(op, ": lse ", lse.str(), " is not one value a row and head of ", q.str());
}

// paged_attention's queries `q` (T, heads, D), caches, metadata and output (qkv_attention's too).
void check_attention(std::string_view op, DType d, const Tensor& q, const Tensor& cache_k,
                     const Tensor& cache_v, const AttentionMetadata& meta, const Tensor& out) {
  expect(out, d, op, "out");
  expect(cache_k, d, op, "key cache");
  expect(cache_v, d, op, "value cache");
  for (const Tensor* t : {&meta.query_start, &meta.context_lens, &meta.block_tables, &meta.positions}) {
    expect(*t, DType::int32, op, "metadata");
  }
  const int64_t S = meta.context_lens.size(0);
  if (!(q.dim() == 3 && out.shape() == q.shape() && cache_k.dim() == 4 && cache_k.size(3) == q.size(2) &&
        cache_k.size(2) > 0 && q.size(1) % cache_k.size(2) == 0 && cache_v.shape() == cache_k.shape()))
    throw_error("attention: shapes ", q.str(), ", cache ", cache_k.str(), " -> ", out.str(), " do not match");
  check(meta.query_start.size(0) == S + 1 && meta.positions.size(0) == q.size(0) &&
            meta.block_tables.dim() == 2 && meta.block_tables.size(0) == S,
        "attention: metadata does not describe ", q.size(0), " rows");
}

}  // namespace

void qkv_rope_cache(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                    const Tensor& cos, const Tensor& sin, const Tensor& slots, Tensor& q, Tensor& cache_k,
                    Tensor& cache_v, std::string_view variant) {
  const op::QkvRopeCache a{qkv, q_norm, k_norm, eps, cos, sin, slots, q, cache_k, cache_v};
  const DType d = compute_dtype(a);
  expect(q, d, a.name, "q");
  check_qkv_cache(a.name, d, slots, q, cache_k, cache_v);
  check_qkv_inputs(a.name, d, qkv, q_norm, k_norm, cos, sin, q, cache_k.size(2));
  dispatch(a, variant);
}

bool qkv_rope_trains_on(DeviceType device, DType dtype) {
  return kernel_registry().find<op::QkvRope>(device, dtype) &&
         kernel_registry().find<op::QkvRopeBackward>(device, dtype);
}

void qkv_rope(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& cos,
              const Tensor& sin, Tensor& q, Tensor& k, Tensor& v, std::string_view variant) {
  const op::QkvRope a{qkv, q_norm, k_norm, eps, cos, sin, q, k, v};
  const DType d = compute_dtype(a);
  for (const auto& [t, what] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}}) expect(*t, d, a.name, what);
  if (!(q.dim() == 3 && k.dim() == 3 && k.size(0) == q.size(0) && k.size(2) == q.size(2) &&
        v.shape() == k.shape()))
    throw_error(a.name, ": q ", q.str(), ", k ", k.str(), " and v ", v.str(), " do not match");
  check_qkv_inputs(a.name, d, qkv, q_norm, k_norm, cos, sin, q, k.size(1));
  dispatch(a, variant);
}

void paged_attention(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v,
                     const AttentionMetadata& meta, float scale, int64_t window, Tensor& out,
                     std::string_view variant) {
  const op::PagedAttention a{q, cache_k, cache_v, meta, scale, window, out};
  const DType d = compute_dtype(a);
  expect(q, d, a.name, "q");
  check_attention(a.name, d, q, cache_k, cache_v, meta, out);
  dispatch(a, variant);
}

bool paged_attention_lse(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v,
                         const AttentionMetadata& meta, float scale, int64_t window, Tensor& out, Tensor& lse,
                         std::string_view variant) {
  const op::PagedAttentionLse a{q, cache_k, cache_v, meta, scale, window, out, lse};
  const DType d = compute_dtype(a);
  expect(q, d, a.name, "q");
  check_attention(a.name, d, q, cache_k, cache_v, meta, out);
  expect_row_stats(a.name, lse, q);
  return dispatch_if_taken(a, variant);
}

bool paged_attention_lse_runs_on(DeviceType device, DType dtype, std::string_view variant) {
  return kernel_registry().find<op::PagedAttentionLse>(device, dtype, variant) != nullptr;
}

bool qkv_attention(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                   const Tensor& cos, const Tensor& sin, const AttentionMetadata& meta, float scale,
                   int64_t window, Tensor& cache_k, Tensor& cache_v, Tensor& out, std::string_view variant) {
  const op::QkvAttention a{qkv, q_norm, k_norm, eps, cos, sin, meta, scale, window, cache_k, cache_v, out};
  const DType d = compute_dtype(a);
  check_attention(a.name, d, out, cache_k, cache_v, meta, out);
  check_qkv_cache(a.name, d, meta.slots, out, cache_k, cache_v);
  check_qkv_inputs(a.name, d, qkv, q_norm, k_norm, cos, sin, out, cache_k.size(2));
  if (!(meta.one_row_per_sequence && meta.context_lens.size(0) == out.size(0)))
    throw_error("qkv_attention: the step is not one query row a sequence (", out.size(0), " rows, ",
                meta.context_lens.size(0), " sequences)");
  return dispatch_if_taken(a, variant);
}

namespace {

// A float32 gradient accumulator of `shape`, when defined.
void expect_accumulator(const Tensor& t, const Shape& shape, std::string_view op, const char* what) {
  if (!t.defined()) return;
  expect(t, DType::float32, op, what);
  if (!(t.shape() == shape)) throw_error(op, ": ", what, " ", t.str(), " is not ", shape_str(shape));
}

// An activation gradient of `like`'s shape in `dtype`, when defined.
void expect_gradient(const Tensor& t, const Tensor& like, DType dtype, std::string_view op,
                     const char* what) {
  if (!t.defined()) return;
  expect(t, dtype, op, what);
  if (!(t.shape() == like.shape()))
    throw_error(op, ": ", what, " ", t.str(), " is not of the shape of ", like.str());
}

}  // namespace

void linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                     Tensor& dbias) {
  const op::LinearBackward a{x, w, dy, dx, dw, dbias};
  const DType d = compute_dtype(a);
  expect(x, d, a.name, "x");
  expect(w, d, a.name, "weight");
  expect(dy, d, a.name, "dy");
  if (!(x.dim() == 2 && w.dim() == 2 && dy.dim() == 2 && w.size(1) == x.size(1) && dy.size(0) == x.size(0) &&
        dy.size(1) == w.size(0)))
    throw_error("linear_backward: shapes ", x.str(), ", ", w.str(), ", ", dy.str(), " do not match");
  expect_gradient(dx, x, d, a.name, "dx");
  expect_accumulator(dw, w.shape(), a.name, "dw");
  expect_accumulator(dbias, {w.size(0)}, a.name, "dbias");
  dispatch(a);
}

void rms_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dout, Tensor& dx,
                       Tensor& dweight, bool accumulate) {
  const op::RmsNormBackward a{x, weight, eps, dout, dx, dweight, accumulate};
  const DType d = compute_dtype(a);
  expect(x, d, a.name, "x");
  expect(weight, d, a.name, "weight");
  expect(dout, d, a.name, "dout");
  if (!(weight.dim() == 1 && x.dim() >= 1 && x.size(-1) == weight.size(0) && dout.shape() == x.shape()))
    throw_error("rms_norm_backward: shapes ", x.str(), ", ", weight.str(), ", ", dout.str(), " do not match");
  expect_gradient(dx, x, d, a.name, "dx");
  expect_accumulator(dweight, weight.shape(), a.name, "dweight");
  check(!accumulate || (dx.defined() && dx.raw() != dout.raw()),
        "rms_norm_backward: accumulating needs a dx of its own, not dout");
  dispatch(a);
}

void silu_mul_backward(const Tensor& gate_up, const Tensor& dout, Tensor& dgate_up) {
  const op::SiluMulBackward a{gate_up, dout, dgate_up};
  const DType d = compute_dtype(a);
  expect(gate_up, d, a.name, "gate_up");
  expect(dout, d, a.name, "dout");
  expect(dgate_up, d, a.name, "dgate_up");
  if (!(gate_up.dim() == 2 && dout.dim() == 2 && gate_up.size(0) == dout.size(0) &&
        gate_up.size(1) == 2 * dout.size(1) && dgate_up.shape() == gate_up.shape()))
    throw_error("silu_mul_backward: shapes ", gate_up.str(), ", ", dout.str(), " -> ", dgate_up.str(),
                " do not match");
  dispatch(a);
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable) {
  const op::EmbeddingBackward a{ids, dout, dtable};
  const DType d = compute_dtype(a);
  expect(ids, DType::int32, a.name, "ids");
  expect(dout, d, a.name, "dout");
  expect(dtable, DType::float32, a.name, "dtable");
  if (!(ids.dim() == 1 && dout.dim() == 2 && dout.size(0) == ids.size(0) && dtable.dim() == 2 &&
        dtable.size(1) == dout.size(1)))
    throw_error("embedding_backward: shapes ", ids.str(), ", ", dout.str(), " -> ", dtable.str(),
                " do not match");
  dispatch(a);
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& dout, const Tensor& query_start, float scale, int64_t window,
                        Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& lse, int64_t max_rows) {
  const op::AttentionBackward a{q, k, v, out, dout, query_start, scale, window, dq, dk, dv, lse, max_rows};
  const DType d = compute_dtype(a);
  for (const auto& [t, what] : {std::pair<const Tensor*, const char*>{&q, "q"},
                                {&k, "k"},
                                {&v, "v"},
                                {&out, "out"},
                                {&dout, "dout"},
                                {&dq, "dq"},
                                {&dk, "dk"},
                                {&dv, "dv"}})
    expect(*t, d, a.name, what);
  expect(query_start, DType::int32, a.name, "query_start");
  if (!(q.dim() == 3 && k.dim() == 3 && k.size(0) == q.size(0) && k.size(2) == q.size(2) && k.size(1) > 0 &&
        q.size(1) % k.size(1) == 0 && v.shape() == k.shape() && out.shape() == q.shape() &&
        dout.shape() == q.shape() && dq.shape() == q.shape() && dk.shape() == k.shape() &&
        dv.shape() == k.shape() && query_start.dim() == 1 && query_start.size(0) >= 1))
    throw_error("attention_backward: shapes ", q.str(), ", ", k.str(), ", ", query_start.str(),
                " do not match");
  check(window >= 0, "attention_backward: negative window ", window);
  check(max_rows >= 0 && max_rows <= q.size(0), "attention_backward: max_rows ", max_rows, " for ", q.size(0),
        " rows");
  if (lse.defined()) expect_row_stats(a.name, lse, q);
  dispatch(a);
}

void qkv_rope_backward(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                       const Tensor& cos, const Tensor& sin, const Tensor& dq, const Tensor& dk,
                       const Tensor& dv, Tensor& dqkv, Tensor& dq_norm, Tensor& dk_norm) {
  const op::QkvRopeBackward a{qkv, q_norm, k_norm, eps, cos, sin, dq, dk, dv, dqkv, dq_norm, dk_norm};
  const DType d = compute_dtype(a);
  for (const auto& [t, what] : {std::pair{&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}, {&dqkv, "dqkv"}})
    expect(*t, d, a.name, what);
  if (!(dq.dim() == 3 && dk.dim() == 3 && dk.size(0) == dq.size(0) && dk.size(2) == dq.size(2) &&
        dv.shape() == dk.shape() && dqkv.shape() == qkv.shape()))
    throw_error(a.name, ": dq ", dq.str(), ", dk ", dk.str(), ", dv ", dv.str(), " and dqkv ", dqkv.str(),
                " do not match");
  check_qkv_inputs(a.name, d, qkv, q_norm, k_norm, cos, sin, dq, dk.size(1));
  const Shape norm_shape{dq.size(2)};
  expect_accumulator(dq_norm, norm_shape, a.name, "dq_norm");
  expect_accumulator(dk_norm, norm_shape, a.name, "dk_norm");
  check(q_norm.defined() || !dq_norm.defined(), a.name, ": dq_norm without q_norm");
  check(k_norm.defined() || !dk_norm.defined(), a.name, ": dk_norm without k_norm");
  dispatch(a);
}

void cross_entropy(const Tensor& logits, const Tensor& labels, float grad_scale, Tensor& loss,
                   Tensor& dlogits) {
  const op::CrossEntropy a{logits, labels, grad_scale, loss, dlogits};
  const DType d = compute_dtype(a);
  expect(logits, d, a.name, "logits");
  expect(labels, DType::int32, a.name, "labels");
  expect(loss, DType::float32, a.name, "loss");
  expect(dlogits, d, a.name, "dlogits");
  if (!(logits.dim() == 2 && logits.size(1) > 0 && labels.dim() == 1 && labels.size(0) == logits.size(0) &&
        loss.numel() == 1 && dlogits.shape() == logits.shape()))
    throw_error("cross_entropy: shapes ", logits.str(), ", ", labels.str(), " do not match");
  dispatch(a);
}

void sum_squares(const Tensor& x, Tensor& out) {
  const op::SumSquares a{x, out};
  expect(x, DType::float32, a.name, "x");
  expect(out, DType::float32, a.name, "out");
  if (!(out.numel() == 1)) throw_error("sum_squares: out ", out.str(), " is not one element");
  dispatch(a);
}

void dropout(const Tensor& x, float p, uint64_t seed, Tensor& out) {
  const op::Dropout a{x, p, seed, out};
  const DType d = compute_dtype(a);
  expect(x, d, a.name, "x");
  expect(out, d, a.name, "out");
  check(out.shape() == x.shape(), "dropout: shapes ", x.str(), " and ", out.str(), " differ");
  check(p >= 0.f && p < 1.f, "dropout: probability ", p, " is not in [0, 1)");
  dispatch(a);
}

void adamw(Tensor& master, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& param,
           const AdamWStep& s) {
  const op::AdamW a{master,  grad,    exp_avg, exp_avg_sq,     param,        s.lr,
                    s.beta1, s.beta2, s.eps,   s.weight_decay, s.grad_scale, s.step};
  for (const auto& [t, what] : {std::pair<const Tensor*, const char*>{&master, "master"},
                                {&grad, "grad"},
                                {&exp_avg, "exp_avg"},
                                {&exp_avg_sq, "exp_avg_sq"}}) {
    expect(*t, DType::float32, a.name, what);
    if (!(t->shape() == master.shape()))
      throw_error("adamw: ", what, " ", t->str(), " is not of the master's shape ", master.str());
  }
  if (param.defined()) {
    expect(param, compute_dtype(param.dtype(), a.name), a.name, "param");
    if (!(param.shape() == master.shape()))
      throw_error("adamw: param ", param.str(), " is not of the master's shape");
  }
  check(s.step >= 1, "adamw: step ", s.step, " (the first is 1)");
  dispatch(a);
}

}  // namespace tfm::ops

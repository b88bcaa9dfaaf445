#include "tfm/model/layers.h"

#include <cmath>
#include <cstring>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"

namespace tfm {

void SavedActivations::keep(std::string name, const Tensor& t) {
  tensors_.emplace_back(std::move(name), t);
}

const Tensor* SavedActivations::find(std::string_view name) const {
  for (const auto& [n, t] : tensors_)
    if (n == name) return &t;
  return nullptr;
}

void Gradients::add(std::string name, Tensor accumulator) {
  check(accumulator.dtype() == DType::float32, "the gradient of ", name, " must be float32, got ",
        accumulator.str());
  grads_.emplace_back(std::move(name), std::move(accumulator));
}

Tensor Gradients::of(std::string_view name) const {
  for (const auto& [n, t] : grads_)
    if (n == name) return t;
  return {};
}

Tensor BackwardContext::empty(const Shape& shape) const {
  return tfm::empty(shape, dtype, device);
}

const Tensor& BackwardContext::kept(const std::string& layer, const char* what) const {
  const Tensor* t = saved.find(layer + "." + what);
  check(t != nullptr, "backward of ", layer, ": the forward kept no ", what, " (run it with SavedActivations)");
  return *t;
}

Tensor StepContext::empty(const Shape& shape) const {
  return tfm::empty(shape, dtype, device);
}

Linear::Linear(std::string name, std::unique_ptr<LinearWeight> weight, Tensor bias)
    : name_(std::move(name)), weight_(std::move(weight)), bias_(std::move(bias)) {}

Tensor Linear::forward(const Tensor& x, const StepContext& ctx) const {
  Tensor y = ctx.empty({x.size(0), weight_->out_features()});
  forward_into(x, y, ctx);
  return y;
}

void Linear::forward_into(const Tensor& x, Tensor& y, const StepContext& ctx) const {
  ctx.keep(name_, "input", x);
  weight_->forward(x, bias_, y, ctx, name_);
}

const Tensor* Linear::foldable(int64_t rows, bool gated, const StepContext& ctx) const {
  const Tensor* w = weight_->dense();
  if (ctx.saved || !w || rows > op::NormLinear::kMaxRows || ctx.kernels.of("RMSNorm") != "fused" ||
      !ctx.kernels.of("Linear").empty() || (gated && !ctx.kernels.of("SiLUAndMul").empty()) ||
      !ops::norm_linear_runs_on(ctx.device.type, ctx.dtype, "fused"))
    return nullptr;
  return w;
}

Tensor Linear::forward_folded(const BlockInput& in, bool gated, const StepContext& ctx) const {
  const int64_t rows = in.residual.size(0);
  const Tensor* w = foldable(rows, gated, ctx);
  if (!w) return {};
  Tensor y = ctx.empty({rows, gated ? w->size(0) / 2 : w->size(0)});
  Tensor residual = in.pending.defined() ? ctx.empty(in.residual.shape()) : in.residual;
  if (!ops::norm_linear(in.residual, in.pending, in.norm.weight(), in.norm.eps(), *w, bias_, gated, residual, y,
                        "fused"))
    return {};
  in.residual = residual;
  return y;
}

Tensor Linear::forward_gated(const Tensor& x, const StepContext& ctx) const {
  const Tensor* w = foldable(x.size(0), true, ctx);
  if (!w) return {};
  Tensor y = ctx.empty({x.size(0), w->size(0) / 2});
  Tensor no_residual;
  if (!ops::norm_linear(x, Tensor(), Tensor(), 0.f, *w, bias_, true, no_residual, y, "fused")) return {};
  return y;
}

Tensor Linear::backward(const Tensor& dy, const BackwardContext& ctx, bool need_dx) const {
  const Tensor& x = ctx.kept(name_, "input");
  Tensor dx = need_dx ? ctx.empty(x.shape()) : Tensor();
  Tensor dbias = bias_.defined() ? ctx.grads.of(name_ + ".bias") : Tensor();
  weight_->backward(x, dy, dx, dbias, ctx, name_);
  return dx;
}

Tensor Embedding::forward(const Tensor& ids, const StepContext& ctx) const {
  ctx.keep(name_, "input", ids);
  Tensor out = ctx.empty({ids.size(0), table_.size(1)});
  ops::embedding(table_, ids, out, ctx.kernels.of("Embedding"));
  return out;
}

void Embedding::backward(const Tensor& dout, const BackwardContext& ctx) const {
  Tensor dtable = ctx.grads.of(name_ + ".weight");
  if (dtable.defined()) ops::embedding_backward(ctx.kept(name_, "input"), dout, dtable);
}

Tensor RMSNorm::forward(const Tensor& x, const StepContext& ctx) const {
  // The residual stream, which a step that keeps it does not write (forward_residual).
  ctx.keep(name_, "input", x);
  Tensor out = ctx.empty(x.shape());
  ops::rms_norm(x, weight_, eps_, out, ctx.kernels.of("RMSNorm"));
  return out;
}

void RMSNorm::forward_(Tensor& x, const StepContext& ctx) const {
  // A step that keeps x for the backward normalises into a new tensor, which x then names.
  Tensor out = ctx.saved ? ctx.empty(x.shape()) : x;
  ops::rms_norm(x, weight_, eps_, out, ctx.kernels.of("RMSNorm"));
  ctx.keep(name_, "input", x);
  x = out;
}

Tensor RMSNorm::forward_residual(Tensor& residual, const Tensor& x, const StepContext& ctx) const {
  Tensor out = ctx.empty(residual.shape());
  if (!ctx.saved) {
    ops::add_rms_norm(residual, x, weight_, eps_, out, ctx.kernels.of("RMSNorm"));
    return out;
  }
  // A step that keeps activations leaves each version of the stream as it was, for the norms' backwards: the
  // sum (the same bits either way round) goes into x's tensor, the block's output, which nothing reads after
  // this, and residual then names it.
  Tensor sum = x;
  ops::add_rms_norm(sum, residual, weight_, eps_, out, ctx.kernels.of("RMSNorm"));
  residual = sum;
  ctx.keep(name_, "input", residual);
  return out;
}

Tensor RMSNorm::backward(const Tensor& dout, const BackwardContext& ctx) const {
  Tensor dx = ctx.empty(dout.shape());
  Tensor dweight = weight_gradient(ctx);
  ops::rms_norm_backward(ctx.kept(name_, "input"), weight_, eps_, dout, dx, dweight);
  return dx;
}

void RMSNorm::backward_add(const Tensor& dout, Tensor& grad, const BackwardContext& ctx) const {
  Tensor dweight = weight_gradient(ctx);
  ops::rms_norm_backward(ctx.kept(name_, "input"), weight_, eps_, dout, grad, dweight, /*accumulate=*/true);
}

Tensor RMSNorm::weight_gradient(const BackwardContext& ctx) const {
  return ctx.grads.of(name_ + ".weight");
}

namespace {

// A q or k norm's weight, or an undefined tensor where the model has none.
const Tensor& norm_weight(const std::optional<RMSNorm>& norm) {
  static const Tensor none;
  return norm ? norm->weight() : none;
}

}  // namespace

Attention::Attention(std::string name, Geometry geometry, Linear qkv_proj, Linear o_proj,
                     std::optional<RMSNorm> q_norm, std::optional<RMSNorm> k_norm)
    : name_(std::move(name)),
      geometry_(geometry),
      scale_(1.f / std::sqrt(static_cast<float>(geometry.head_dim))),
      qkv_proj_(std::move(qkv_proj)),
      o_proj_(std::move(o_proj)),
      q_norm_(std::move(q_norm)),
      k_norm_(std::move(k_norm)) {}

Tensor BlockInput::normalized(const StepContext& ctx) const {
  return pending.defined() ? norm.forward_residual(residual, pending, ctx) : norm.forward(residual, ctx);
}

Tensor Attention::forward(const BlockInput& in, LayerCache& cache, const StepContext& ctx) const {
  const auto [heads, kv_heads, head_dim, window] = geometry_;
  Tensor qkv = qkv_proj_.forward_folded(in, false, ctx);  // rows of [q | k | v]
  if (!qkv.defined()) qkv = qkv_proj_.forward(in.normalized(ctx), ctx);
  const int64_t T = qkv.size(0);
  const std::string_view attention = ctx.kernels.of("Attention");
  const Tensor& q_norm = norm_weight(q_norm_);
  const Tensor& k_norm = norm_weight(k_norm_);
  const float eps = q_norm_ ? q_norm_->eps() : 0.f;
  Tensor out = ctx.empty({T, heads, head_dim});
  if (!ctx.saved && ctx.meta.one_row_per_sequence &&
      ops::qkv_attention(qkv, q_norm, k_norm, eps, ctx.cos, ctx.sin, ctx.meta, scale_, window, cache.key,
                         cache.value, out, attention))
    return o_proj_.forward(out.reshape({T, heads * head_dim}), ctx);
  Tensor q = ctx.empty({T, heads, head_dim});
  if (!ctx.saved && ops::qkv_rope_cache_runs_on(ctx.device.type, ctx.dtype)) {
    ops::qkv_rope_cache(qkv, q_norm, k_norm, eps, ctx.cos, ctx.sin, ctx.meta.slots, q, cache.key, cache.value,
                        attention);
  } else if (ctx.saved && ops::qkv_rope_trains_on(ctx.device.type, ctx.dtype)) {
    // A training step keeps k and v for the backward, and qkv, from which qkv_rope_backward takes the norms'
    // inputs. Where the rows' slots are the caches' first T in order, k and v are written into the caches
    // themselves and kept there: no kv_cache_write, and no tensors of their own.
    const auto rows_of = [&](const Tensor& cache_part) {
      return cache_part.reshape({cache_part.size(0) * cache_part.size(1), kv_heads, head_dim}).narrow(0, T);
    };
    const bool in_place = ctx.meta.slots_in_order;
    Tensor k = in_place ? rows_of(cache.key) : ctx.empty({T, kv_heads, head_dim}),
           v = in_place ? rows_of(cache.value) : ctx.empty({T, kv_heads, head_dim});
    ops::qkv_rope(qkv, q_norm, k_norm, eps, ctx.cos, ctx.sin, q, k, v, attention);
    if (!in_place) ops::kv_cache_write(k, v, ctx.meta.slots, cache.key, cache.value, attention);
    ctx.keep(name_, "qkv", qkv);
    ctx.keep(name_, "key", k);
    ctx.keep(name_, "value", v);
  } else {
    Tensor k = ctx.empty({T, kv_heads, head_dim}), v = ctx.empty({T, kv_heads, head_dim});
    Tensor* const parts[] = {&q, &k, &v};
    ops::split_columns(qkv, parts);
    if (q_norm_) q_norm_->forward_(q, ctx);
    if (k_norm_) k_norm_->forward_(k, ctx);
    const std::string_view rotary = ctx.kernels.of("RotaryEmbedding");
    ops::rope_(q, ctx.cos, ctx.sin, rotary);
    ops::rope_(k, ctx.cos, ctx.sin, rotary);
    ops::kv_cache_write(k, v, ctx.meta.slots, cache.key, cache.value, attention);
    ctx.keep(name_, "key", k);
    ctx.keep(name_, "value", v);
  }
  ctx.keep(name_, "query", q);
  // A training forward keeps each row's log-sum-exp where the device's kernel can, which the backward then
  // need not compute.
  Tensor lse = ctx.saved && ops::paged_attention_lse_runs_on(ctx.device.type, ctx.dtype, attention)
                   ? tfm::empty({T, heads}, DType::float32, ctx.device)
                   : Tensor();
  if (lse.defined() &&
      ops::paged_attention_lse(q, cache.key, cache.value, ctx.meta, scale_, window, out, lse, attention)) {
    ctx.keep(name_, "lse", lse);
  } else {
    ops::paged_attention(q, cache.key, cache.value, ctx.meta, scale_, window, out, attention);
  }
  return o_proj_.forward(out.reshape({T, heads * head_dim}), ctx);
}

Tensor Attention::backward(const Tensor& dy, const BackwardContext& ctx) const {
  const auto [heads, kv_heads, head_dim, window] = geometry_;
  const int64_t T = dy.size(0);
  const Tensor dattention = o_proj_.backward(dy, ctx).reshape({T, heads, head_dim});
  Tensor dq = ctx.empty({T, heads, head_dim}), dk = ctx.empty({T, kv_heads, head_dim}),
         dv = ctx.empty({T, kv_heads, head_dim});
  const Tensor* lse = ctx.saved.find(name_ + ".lse");
  ops::attention_backward(ctx.kept(name_, "query"), ctx.kept(name_, "key"), ctx.kept(name_, "value"),
                          ctx.kept(o_proj_.name(), "input").reshape({T, heads, head_dim}), dattention,
                          ctx.query_start, scale_, window, dq, dk, dv, lse ? *lse : Tensor(),
                          ctx.max_sequence_rows);
  Tensor dqkv = ctx.empty({T, (heads + 2 * kv_heads) * head_dim});
  if (const Tensor* qkv = ctx.saved.find(name_ + ".qkv")) {
    Tensor dq_norm = q_norm_ ? q_norm_->weight_gradient(ctx) : Tensor();
    Tensor dk_norm = k_norm_ ? k_norm_->weight_gradient(ctx) : Tensor();
    ops::qkv_rope_backward(*qkv, norm_weight(q_norm_), norm_weight(k_norm_), q_norm_ ? q_norm_->eps() : 0.f,
                           ctx.cos, ctx.neg_sin, dq, dk, dv, dqkv, dq_norm, dk_norm);
    return qkv_proj_.backward(dqkv, ctx);
  }
  ops::rope_(dq, ctx.cos, ctx.neg_sin);  // a rotation's transpose is the rotation back
  ops::rope_(dk, ctx.cos, ctx.neg_sin);
  if (q_norm_) dq = q_norm_->backward(dq, ctx);
  if (k_norm_) dk = k_norm_->backward(dk, ctx);
  const Tensor* const parts[] = {&dq, &dk, &dv};
  ops::concat_columns(parts, dqkv);
  return qkv_proj_.backward(dqkv, ctx);
}

Tensor MLP::forward(const BlockInput& in, const StepContext& ctx) const {
  Tensor act = gate_up_proj_.forward_folded(in, true, ctx);
  if (!act.defined()) {
    const Tensor x = in.normalized(ctx);
    act = gate_up_proj_.forward_gated(x, ctx);
    if (!act.defined()) {
      const Tensor gate_up = gate_up_proj_.forward(x, ctx);  // rows of [gate | up]
      ctx.keep(name_, "gate_up", gate_up);
      act = ctx.empty({gate_up.size(0), gate_up.size(1) / 2});
      ops::silu_mul(gate_up, act, ctx.kernels.of("SiLUAndMul"));
    }
  }
  return down_proj_.forward(act, ctx);
}

Tensor MLP::backward(const Tensor& dy, const BackwardContext& ctx) const {
  const Tensor dact = down_proj_.backward(dy, ctx);
  const Tensor& gate_up = ctx.kept(name_, "gate_up");
  Tensor dgate_up = ctx.empty(gate_up.shape());
  ops::silu_mul_backward(gate_up, dact, dgate_up);
  return gate_up_proj_.backward(dgate_up, ctx);
}

void DecoderLayer::forward(Tensor& h, Tensor& pending, LayerCache& cache, const StepContext& ctx) const {
  pending = self_attn_.forward({h, pending, input_layernorm_}, cache, ctx);
  pending = mlp_.forward({h, pending, post_attention_layernorm_}, ctx);
}

// The residual stream's gradient passes each block's norm and reaches the block's input as well as, unchanged,
// the stream before it.
void DecoderLayer::backward(Tensor& grad, const BackwardContext& ctx) const {
  post_attention_layernorm_.backward_add(mlp_.backward(grad, ctx), grad, ctx);
  input_layernorm_.backward_add(self_attn_.backward(grad, ctx), grad, ctx);
}

}  // namespace tfm

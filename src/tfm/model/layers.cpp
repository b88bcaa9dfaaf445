#include "tfm/model/layers.h"

#include <cmath>

#include "tfm/backend/backend.h"

namespace tfm {

void SavedActivations::keep(std::string name, const Tensor& t) {
  tensors_.emplace_back(std::move(name), clone(t));
}

const Tensor* SavedActivations::find(std::string_view name) const {
  for (const auto& [n, t] : tensors_)
    if (n == name) return &t;
  return nullptr;
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
  weight_->forward(x, bias_, y, ctx.kernels.of("Linear"));
}

Tensor Embedding::forward(const Tensor& ids, const StepContext& ctx) const {
  ctx.keep(name_, "input", ids);
  Tensor out = ctx.empty({ids.size(0), table_.size(1)});
  ops::embedding(table_, ids, out, ctx.kernels.of("Embedding"));
  return out;
}

Tensor RMSNorm::forward(const Tensor& x, const StepContext& ctx) const {
  ctx.keep(name_, "input", x);
  Tensor out = ctx.empty(x.shape());
  ops::rms_norm(x, weight_, eps_, out, ctx.kernels.of("RMSNorm"));
  return out;
}

void RMSNorm::forward_(Tensor& x, const StepContext& ctx) const {
  ctx.keep(name_, "input", x);
  ops::rms_norm(x, weight_, eps_, x, ctx.kernels.of("RMSNorm"));
}

Tensor RMSNorm::forward_residual(Tensor& residual, const Tensor& x, const StepContext& ctx) const {
  Tensor out = ctx.empty(residual.shape());
  ops::add_rms_norm(residual, x, weight_, eps_, out, ctx.kernels.of("RMSNorm"));
  ctx.keep(name_, "input", residual);
  return out;
}

Attention::Attention(std::string name, Geometry geometry, Linear qkv_proj, Linear o_proj,
                     std::optional<RMSNorm> q_norm, std::optional<RMSNorm> k_norm)
    : name_(std::move(name)),
      geometry_(geometry),
      scale_(1.f / std::sqrt(static_cast<float>(geometry.head_dim))),
      qkv_proj_(std::move(qkv_proj)),
      o_proj_(std::move(o_proj)),
      q_norm_(std::move(q_norm)),
      k_norm_(std::move(k_norm)) {}

Tensor Attention::forward(const Tensor& x, LayerCache& cache, const StepContext& ctx) const {
  const auto [heads, kv_heads, head_dim, window] = geometry_;
  const int64_t T = x.size(0);
  const Tensor qkv = qkv_proj_.forward(x, ctx);  // rows of [q | k | v]
  Tensor q = ctx.empty({T, heads, head_dim});
  const std::string_view attention = ctx.kernels.of("Attention");
  if (!ctx.saved && ops::qkv_rope_cache_runs_on(ctx.device.type, ctx.dtype)) {
    // One pass where the device has it; a training step keeps the norms' inputs, which only the steps below give.
    ops::qkv_rope_cache(qkv, q_norm_ ? q_norm_->weight() : Tensor(), k_norm_ ? k_norm_->weight() : Tensor(),
                        q_norm_ ? q_norm_->eps() : 0.f, ctx.cos, ctx.sin, ctx.meta.slots, q, cache.key, cache.value,
                        attention);
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
  }
  ctx.keep(name_, "query", q);
  Tensor out = ctx.empty({T, heads, head_dim});
  ops::paged_attention(q, cache.key, cache.value, ctx.meta, scale_, window, out, attention);
  return o_proj_.forward(out.reshape({T, heads * head_dim}), ctx);
}

Tensor MLP::forward(const Tensor& x, const StepContext& ctx) const {
  const Tensor gate_up = gate_up_proj_.forward(x, ctx);  // rows of [gate | up]
  Tensor act = ctx.empty({x.size(0), gate_up.size(1) / 2});
  ops::silu_mul(gate_up, act, ctx.kernels.of("SiLUAndMul"));
  return down_proj_.forward(act, ctx);
}

void DecoderLayer::forward(Tensor& h, Tensor& pending, LayerCache& cache, const StepContext& ctx) const {
  Tensor x = pending.defined() ? input_layernorm_.forward_residual(h, pending, ctx) : input_layernorm_.forward(h, ctx);
  pending = self_attn_.forward(x, cache, ctx);
  x = post_attention_layernorm_.forward_residual(h, pending, ctx);
  pending = mlp_.forward(x, ctx);
}

}  // namespace tfm

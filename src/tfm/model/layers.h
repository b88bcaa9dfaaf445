// The layers decoder-only models are composed of: Embedding, Linear, RMSNorm, Attention, MLP and
// DecoderLayer. Each owns its weights (device tensors in the model's dtype), computes through ops/ with the
// kernel variant the model gives its layer kind, and is named by its Hub prefix ("model.layers.0.mlp").
// A forward step's shared inputs travel in a StepContext; when it carries SavedActivations, layers keep what a
// backward pass needs, and nothing otherwise.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/ops/kernel_config.h"
#include "tfm/model/kv_cache.h"
#include "tfm/ops/ops.h"

namespace tfm {

// Tensors a training forward keeps for the backward, by the name of the layer that kept them and what they
// are ("model.layers.0.mlp.down_proj.input"). A kept tensor is held, not copied: nothing may write it after
// (a training step's residual stream is a new tensor at each add: RMSNorm::forward_residual).
class SavedActivations {
 public:
  void keep(std::string name, const Tensor& t);
  const Tensor* find(std::string_view name) const;  // nullptr when not kept
  const std::vector<std::pair<std::string, Tensor>>& all() const { return tensors_; }
  void clear() { tensors_.clear(); }

 private:
  std::vector<std::pair<std::string, Tensor>> tensors_;
};

// Float32 gradient accumulators of parameters by name ("model.layers.0.mlp.down_proj.weight"), on the model's
// device; a parameter without one is frozen, and its layer computes no gradient for it. Two names may share one
// accumulator (a tied head and embedding).
class Gradients {
 public:
  void add(std::string name, Tensor accumulator);
  Tensor of(std::string_view name) const;  // undefined when frozen
  const std::vector<std::pair<std::string, Tensor>>& all() const { return grads_; }

 private:
  std::vector<std::pair<std::string, Tensor>> grads_;
};

// What every layer's backward of one step shares: what its forward kept, the step's geometry and the gradients.
struct BackwardContext {
  Device device;
  DType dtype;
  const SavedActivations& saved;
  const Tensor& query_start;  // (S + 1) on the device: the batch's sequences, each from position 0
  int64_t max_sequence_rows;  // the longest sequence's rows
  const Tensor& cos;          // the forward's RoPE tables; sin negated rotates back
  const Tensor& neg_sin;
  Gradients& grads;

  Tensor empty(const Shape& shape) const;
  const Tensor& kept(const std::string& layer, const char* what) const;  // an error when the forward kept none
};

// What every layer of one forward step shares.
struct StepContext {
  Device device;
  DType dtype;                        // of activations, weights and the KV cache
  const ops::AttentionMetadata& meta;
  const Tensor& cos;                  // (T, rot_dim) RoPE tables in `dtype`
  const Tensor& sin;
  const LayerKernels& kernels;
  SavedActivations* saved = nullptr;  // set: keep what a backward pass needs

  Tensor empty(const Shape& shape) const;
  // Keeps t as it is for the backward; nothing may write it after this.
  void keep(const std::string& layer, const char* what, const Tensor& t) const {
    if (saved) saved->keep(layer + "." + what, t);
  }
};

// What a Linear multiplies by. Dense weights now; 4-bit weights and LoRA adapters are other kinds of it, so
// that they plug in without touching the architectures.
class LinearWeight {
 public:
  virtual ~LinearWeight() = default;
  virtual int64_t in_features() const = 0;
  virtual int64_t out_features() const = 0;
  // y = x @ W^T + bias                      x (T, in), bias (out) or undefined, y (T, out)
  // A training forward may keep what the backward reads, beside x (which the Linear keeps), under the name of
  // `layer` (StepContext::keep).
  virtual void forward(const Tensor& x, const Tensor& bias, Tensor& y, const StepContext& ctx,
                       const std::string& layer) const = 0;
  // dx = dy @ W (when dx is defined), the gradients of its own parameters (named from `layer`'s name)
  // accumulated where ctx.grads has them, and dbias += the column sums of dy when defined.
  virtual void backward(const Tensor& x, const Tensor& dy, Tensor& dx, Tensor& dbias,
                        const BackwardContext& ctx, const std::string& layer) const = 0;
  virtual size_t nbytes() const = 0;  // of device memory
  // The weight as one (out, in) tensor, where it is one: what kernels that fold other ops into the matmul take.
  virtual const Tensor* dense() const { return nullptr; }
  // Transformers' train() / eval() reaching the weight (a LoRA adapter's dropout runs only in training).
  virtual void train(bool /*mode*/) {}
};

// A weight held as it is in the checkpoint: (out, in) in the model's dtype.
class DenseWeight final : public LinearWeight {
 public:
  explicit DenseWeight(Tensor w) : w_(std::move(w)) {}
  int64_t in_features() const override { return w_.size(1); }
  int64_t out_features() const override { return w_.size(0); }
  void forward(const Tensor& x, const Tensor& bias, Tensor& y, const StepContext& ctx,
               const std::string& /*layer*/) const override {
    ops::linear(x, w_, bias, y, ctx.kernels.of("Linear"));
  }
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx, Tensor& dbias, const BackwardContext& ctx,
                const std::string& layer) const override {
    Tensor dw = ctx.grads.of(layer + ".weight");
    ops::linear_backward(x, w_, dy, dx, dw, dbias);
  }
  size_t nbytes() const override { return w_.nbytes(); }
  const Tensor* dense() const override { return &w_; }
  const Tensor& tensor() const { return w_; }

 private:
  Tensor w_;
};

struct BlockInput;

class Linear {
 public:
  Linear(std::string name, std::unique_ptr<LinearWeight> weight, Tensor bias = {});
  // x (T, in) -> (T, out)
  Tensor forward(const Tensor& x, const StepContext& ctx) const;
  // The same into y (T, out), allocated by the caller.
  void forward_into(const Tensor& x, Tensor& y, const StepContext& ctx) const;
  // The norm of a block's input and this layer in one kernel, where one takes them (op::NormLinear: with
  // use_kernels' fused RMSNorm and the default Linear, a few rows, dense weights, no training); gated, with
  // silu_mul after it. in.residual becomes the new residual stream. Undefined, having done nothing, elsewhere.
  Tensor forward_folded(const BlockInput& in, bool gated, const StepContext& ctx) const;
  // silu_mul(forward(x)) in one kernel under forward_folded's conditions, for where the norm's fold did not
  // pay: x (T, in) -> (T, out / 2). Undefined, having done nothing, elsewhere.
  Tensor forward_gated(const Tensor& x, const StepContext& ctx) const;
  // dy (T, out) -> dx (T, in); with need_dx false only the parameters' gradients.
  Tensor backward(const Tensor& dy, const BackwardContext& ctx, bool need_dx = true) const;
  const LinearWeight& weight() const { return *weight_; }
  void train(bool mode) { weight_->train(mode); }
  // LoRA and quantized weights wrap or replace the weight a layer was loaded with.
  std::unique_ptr<LinearWeight> replace_weight(std::unique_ptr<LinearWeight> weight) {
    std::swap(weight, weight_);
    return weight;
  }
  const Tensor& bias() const { return bias_; }
  const std::string& name() const { return name_; }

 private:
  // The dense weight that forward_folded and forward_gated hand to op::NormLinear, where their conditions
  // hold.
  const Tensor* foldable(int64_t rows, bool gated, const StepContext& ctx) const;

  std::string name_;
  std::unique_ptr<LinearWeight> weight_;
  Tensor bias_;
};

class Embedding {
 public:
  Embedding(std::string name, Tensor table) : name_(std::move(name)), table_(std::move(table)) {}
  // ids (T) -> (T, hidden)
  Tensor forward(const Tensor& ids, const StepContext& ctx) const;
  void backward(const Tensor& dout, const BackwardContext& ctx) const;  // the table's gradient only
  const Tensor& table() const { return table_; }

 private:
  std::string name_;
  Tensor table_;
};

class RMSNorm {
 public:
  RMSNorm(std::string name, Tensor weight, float eps) : name_(std::move(name)), weight_(std::move(weight)), eps_(eps) {}
  // x (rows, D) or (T, heads, D) -> normalized, of x's shape
  Tensor forward(const Tensor& x, const StepContext& ctx) const;
  // In place; when the step keeps activations, into a new tensor that x then names (the backward reads x).
  void forward_(Tensor& x, const StepContext& ctx) const;
  // The residual stream's update and this norm in one call: residual += x, then normalized residual. A step
  // that keeps activations writes the sum into x's tensor instead, which residual then names.
  Tensor forward_residual(Tensor& residual, const Tensor& x, const StepContext& ctx) const;
  // dout -> the gradient of the norm's input (of dout's shape)
  Tensor backward(const Tensor& dout, const BackwardContext& ctx) const;
  // The same gradient added into `grad` (the residual stream's, which reaches the norm's input unchanged
  // too).
  void backward_add(const Tensor& dout, Tensor& grad, const BackwardContext& ctx) const;
  const Tensor& weight() const { return weight_; }
  float eps() const { return eps_; }
  // The weight's gradient accumulator: undefined where the weight is frozen.
  Tensor weight_gradient(const BackwardContext& ctx) const;

 private:
  std::string name_;
  Tensor weight_;
  float eps_;
};

// A block's input: the residual stream, the previous block's output not yet added to it (undefined before the
// first layer) and the norm the block applies to their sum. Each residual add happens in the norm after it.
struct BlockInput {
  Tensor& residual;
  const Tensor& pending;
  const RMSNorm& norm;
  // residual += pending; the normalized residual
  Tensor normalized(const StepContext& ctx) const;
};

// Grouped-query self-attention over the paged cache: q, k, v from one fused projection, Qwen3's q/k norms,
// RoPE, the cache write, attention and the output projection.
class Attention {
 public:
  struct Geometry {
    int64_t heads, kv_heads, head_dim;
    int64_t window;  // 0: full attention
  };
  Attention(std::string name, Geometry geometry, Linear qkv_proj, Linear o_proj, std::optional<RMSNorm> q_norm,
            std::optional<RMSNorm> k_norm);
  // (T, hidden) -> (T, hidden), its input normalized first; writes this step's keys and values into `cache`
  Tensor forward(const BlockInput& in, LayerCache& cache, const StepContext& ctx) const;
  Tensor backward(const Tensor& dy, const BackwardContext& ctx) const;  // (T, hidden) -> (T, hidden)
  Linear& qkv_proj() { return qkv_proj_; }
  Linear& o_proj() { return o_proj_; }
  const std::optional<RMSNorm>& q_norm() const { return q_norm_; }
  const std::optional<RMSNorm>& k_norm() const { return k_norm_; }
  const Geometry& geometry() const { return geometry_; }

 private:
  std::string name_;
  Geometry geometry_;
  float scale_;
  Linear qkv_proj_, o_proj_;
  std::optional<RMSNorm> q_norm_, k_norm_;
};

// down_proj(silu(gate_proj(x)) * up_proj(x)), gate and up from one fused projection.
class MLP {
 public:
  MLP(std::string name, Linear gate_up_proj, Linear down_proj)
      : name_(std::move(name)), gate_up_proj_(std::move(gate_up_proj)), down_proj_(std::move(down_proj)) {}
  Tensor forward(const BlockInput& in, const StepContext& ctx) const;  // (T, hidden) -> (T, hidden)
  Tensor backward(const Tensor& dy, const BackwardContext& ctx) const;
  Linear& gate_up_proj() { return gate_up_proj_; }
  Linear& down_proj() { return down_proj_; }

 private:
  std::string name_;
  Linear gate_up_proj_, down_proj_;
};

class DecoderLayer {
 public:
  DecoderLayer(RMSNorm input_layernorm, Attention self_attn, RMSNorm post_attention_layernorm, MLP mlp)
      : input_layernorm_(std::move(input_layernorm)),
        self_attn_(std::move(self_attn)),
        post_attention_layernorm_(std::move(post_attention_layernorm)),
        mlp_(std::move(mlp)) {}
  // h is the residual stream (T, hidden) and `pending` the previous block's output not yet added to it
  // (undefined before the first layer): each residual add happens in the RMSNorm that follows it. On return,
  // `pending` is this layer's MLP output.
  void forward(Tensor& h, Tensor& pending, LayerCache& cache, const StepContext& ctx) const;
  // The same step backward: `grad` is the gradient of what the next layer's residual add sums (h + pending)
  // and becomes that of this layer's (the input stream plus the previous block's output).
  void backward(Tensor& grad, const BackwardContext& ctx) const;
  RMSNorm& input_layernorm() { return input_layernorm_; }
  Attention& self_attn() { return self_attn_; }
  RMSNorm& post_attention_layernorm() { return post_attention_layernorm_; }
  MLP& mlp() { return mlp_; }

 private:
  RMSNorm input_layernorm_;
  Attention self_attn_;
  RMSNorm post_attention_layernorm_;
  MLP mlp_;
};

}  // namespace tfm

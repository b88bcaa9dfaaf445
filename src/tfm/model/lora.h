// LoRA adapters as PEFT makes them (peft/tuners/lora): the adapter_config.json fields that shape them
// (lora_config.h), the weight that adds scaling * B(A(x)) to a linear layer's output rows, and an adapter
// folder's load, save and merge. An adapter targets checkpoint modules (q_proj, k_proj, ...) while tfm fuses
// some of them into one Linear (qkv_proj, gate_up_proj): a fused Linear carries one A and B for each of its
// targeted modules, added to that module's block of rows.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tfm/model/causal_lm.h"
#include "tfm/model/layers.h"
#include "tfm/model/lora_config.h"

namespace tfm {

// One adapter on the block of output rows a checkpoint module holds in a Linear.
struct LoraAdapter {
  std::string module;  // "model.layers.0.self_attn.q_proj"
  int64_t row = 0;     // the block's first output row in the Linear
  int64_t rows = 0;
  Tensor a;  // (r, in) in the model's dtype
  Tensor b;  // (rows, r)
  float scaling = 1;
};

// PEFT's key of an adapter tensor as save_pretrained writes it:
// "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"; also the name of its gradient.
std::string lora_key(const std::string& module, char which);

// A frozen base weight plus adapters: y = base(x) + scaling * B(A(dropout(x))) on each adapter's rows.
// Dropout (lora_dropout) runs only in training, each adapter with its own mask drawn from `seed` and the
// number of training forwards so far; a backward uses the masks of the latest forward, as forward_backward
// pairs them.
class LoraWeight final : public LinearWeight {
 public:
  // The adapters' A's become the rows of one matrix: a view of them where they lie so in one storage already
  // (attach_lora and load_adapter place them so), else a copy they are re-pointed to.
  LoraWeight(std::unique_ptr<LinearWeight> base, std::vector<LoraAdapter> adapters, float dropout,
             uint64_t seed);
  int64_t in_features() const override { return base_->in_features(); }
  int64_t out_features() const override { return base_->out_features(); }
  // A training forward keeps the adapters' A outputs (ranks_of) and stacked_b, which the backward's products
  // with dy take.
  void forward(const Tensor& x, const Tensor& bias, Tensor& y, const StepContext& ctx,
               const std::string& layer) const override;
  // dA and dB accumulate under lora_key's names; the base weight's gradient only where ctx.grads has one.
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx, Tensor& dbias, const BackwardContext& ctx,
                const std::string& layer) const override;
  size_t nbytes() const override;
  void train(bool mode) override { training_ = mode; }

  const LinearWeight& base() const { return *base_; }
  const std::vector<LoraAdapter>& adapters() const { return adapters_; }

 private:
  // The adapter's input: x, or in training x through its dropout mask.
  Tensor branch_input(const Tensor& x, size_t adapter) const;
  // Every adapter's A(dropout(x)) side by side, (T, the ranks' sum), in the adapters' order.
  Tensor ranks_of(const Tensor& x, std::string_view variant) const;
  // Without dropout masks every adapter reads x itself, so their A's, rows of stacked_a_, make one product of
  // x (and its backward one of dh, which adds into the base layer's dx as it is computed) where each
  // adapter's made its own.
  bool stacks_a() const { return !dropping(); }
  // Every adapter's scaling * B in one (out_features, the ranks' sum) matrix: adapter i's in its rows and in
  // the columns of its ranks, zeros elsewhere. One product of it adds every adapter's output into the base
  // output, and its backward gives every adapter's input gradient, where an adapter at a time added (and in
  // the backward copied out) its block of output columns apart, a pass over them each. Its blocks are written
  // again (one launch) at each forward, since the B's change at every optimizer step; the zeros stay.
  const Tensor& stacked_b() const;
  // The base weight where a step of x's rows adds the base's product last, onto the adapters' (forward: y =
  // h stacked_b^T + bias, then y += x W^T; backward: dx = dh stacked_a, then dx += dy W): the base's matmul
  // then adds in its epilogue what a pass over y (and dx) of its own added after it. Null where the base is
  // not one dense weight, or for decode's few rows, whose GEMV writes y in one pass.
  const Tensor* base_added_last(const Tensor& x) const;
  uint64_t mask_seed(size_t adapter) const;
  bool dropping() const { return training_ && dropout_ > 0.f; }

  std::unique_ptr<LinearWeight> base_;
  std::vector<LoraAdapter> adapters_;
  Tensor stacked_a_;  // (the ranks' sum, in): every adapter's A is a view of its rows
  Tensor stacked_b_;  // stacked_b()'s matrix, its zeros written once
  float dropout_;
  uint64_t seed_;
  bool training_ = false;
  mutable uint64_t training_forwards_ = 0;
};

// New adapters on the modules `config` targets, initialised as PEFT does from `seed` (A kaiming-uniform, i.e.
// uniform in +-1/sqrt(in), B zeros); returns the trainable tensors by lora_key name, for the optimizer.
std::vector<std::pair<std::string, Tensor>> attach_lora(CausalLM& model, const LoraConfig& config,
                                                        uint64_t seed);

// Attaches the adapter folder `dir` (adapter_config.json, adapter_model.safetensors, as PEFT saves them; keys
// with or without PEFT's ".default" adapter name). A key that is missing, unexpected or of another shape than
// the model's module is an error naming it. Returns the folder's config.
LoraConfig load_adapter(CausalLM& model, const std::string& dir);

// The model's adapter tensors by lora_key name, in layer order and within a Linear its A's before its B's:
// the order they lie in the one buffer attach_lora and load_adapter place them in.
std::vector<std::pair<std::string, Tensor>> lora_tensors(CausalLM& model);

// Writes the model's adapters into `dir` as PEFT's save_pretrained does: adapter_model.safetensors (metadata
// {"format": "pt"}) and adapter_config.json (inference_mode true, keys sorted, indent 2).
void save_adapter(CausalLM& model, const LoraConfig& config, const std::string& dir);

// Folds every adapter into its base weight as PEFT's merge does, W[rows] += scaling * B @ A (the product in
// float32 rounded to the model's dtype, then the sum rounded), and returns each Linear to a dense weight.
void merge_adapter(CausalLM& model);

}  // namespace tfm

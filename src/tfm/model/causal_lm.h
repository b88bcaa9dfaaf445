// A decoder-only causal language model (Llama, Mistral, Qwen2, Qwen3): config, layers and the forward pass
// over a ragged batch with a paged KV cache, in the dtype it was loaded in.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tfm/core/device.h"
#include "tfm/core/kernel_mode.h"
#include "tfm/model/batch.h"
#include "tfm/model/config.h"
#include "tfm/model/kv_cache.h"
#include "tfm/ops/kernel_config.h"

namespace tfm {

class SavedActivations;
class Gradients;
class Linear;
class PendingCopy;

// A tensor of the model's weights as its layers hold it, with the checkpoint tensors it stacks: a fused
// projection holds the rows of several (q_proj, k_proj and v_proj), one of its own otherwise.
struct Parameter {
  std::string name;  // as the layers name it: "model.layers.0.self_attn.qkv_proj.weight"
  Tensor value;      // on the model's device, in its dtype
  std::vector<std::pair<std::string, int64_t>> checkpoint_rows;  // {"model.layers.0.self_attn.q_proj.weight", rows}

  // `values` (of value's shape: the tensor itself, a host copy, its master or its gradient) as the checkpoint's
  // tensors: views of its row blocks under their checkpoint names.
  std::vector<std::pair<std::string, Tensor>> checkpoint_tensors(const Tensor& values) const;
};

// A linear layer and the checkpoint modules whose outputs it stacks ({"model.layers.0.self_attn.q_proj", rows}):
// what LoRA adapters target.
struct LinearModule {
  Linear* linear;
  std::vector<std::pair<std::string, int64_t>> modules;
};

// Transformers' ignore_index: a label that takes no loss.
inline constexpr int32_t kIgnoreIndex = -100;

// One sequence of a training batch, from position 0. Labels are unshifted, as Transformers' are (the loss
// shifts them): one per input id, the id itself where the model is to learn that token, kIgnoreIndex elsewhere.
struct TrainingExample {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> labels;
};

// A training step's summed loss and the number of (shifted) labels it was taken over.
struct StepLoss {
  double loss_sum = 0;
  int64_t items = 0;
};

struct LoadOptions {
  std::string dtype = "auto";  // "auto" (config.json's dtype, else float32), "float32", "bfloat16", "float16"
  std::string device = "cpu";  // resolved by resolve_device: "auto", "cpu", "cuda:0", ...
  std::string attn_implementation = "sdpa";  // "eager", "sdpa", "flash_attention_2", "flash_attention_3"
  bool use_kernels = false;                  // the built-in kernel mapping (Transformers' use_kernels=True)
  KernelConfig kernel_config{};              // per-layer variants; a non-empty one implies use_kernels
  bool progress = true;                      // "Loading weights" on stderr when a load takes over a second
  bool device_graphs = true;                 // decode steps as device graphs where the device has them
};

// How CausalLM::sample chooses one row's token on the device: op::SampleRows' settings (backend/op_set.h
// states each rule and its order), with the tokens its penalties touch.
struct RowSampling {
  float temperature = 0;         // <= 0: greedy, the first largest value after the penalties
  int64_t top_k = 0;             // 0: none
  float top_p = 1;               // 1: none
  float min_p = 0;               // 0: none
  float repetition_penalty = 1;  // applied to every token of `penalized`
  uint64_t key = 0;              // the draw's key (Sampler::next_key)
  // Distinct tokens, each with the amount subtracted from its logit before the repetition penalty (OpenAI's
  // presence and frequency penalties; 0 for a token that only the repetition penalty touches).
  std::vector<std::pair<int32_t, float>> penalized;
};

// The ids a step chose (CausalLM::queue_greedy, queue_sample), on the device and on their way to the host: the
// next step can be queued behind this one and take its input ids from them (EarlierIds) before they are read.
class StepIds {
 public:
  // Queues the copy of `ids` (int32 (R), on any device) to the host.
  explicit StepIds(Tensor ids);
  StepIds(StepIds&&) noexcept;
  StepIds& operator=(StepIds&&) noexcept;
  ~StepIds();

  // One id per row of the step's batch.logits_rows; waits for the step.
  std::vector<int64_t> read();
  const Tensor& on_device() const { return device_; }

 private:
  Tensor device_;
  Tensor host_;
  std::unique_ptr<PendingCopy> copy_;  // into host_: destroyed (waited for) first
};

// Rows of a step whose token an earlier step chose and nobody has read yet: row rows[i] of the batch takes id
// from[i] of `ids` on the device, in order after the earlier step (its token_ids entry is any id in the
// vocabulary). A negative id (the earlier row's logits were not finite) leaves the row's embedding unwritten.
struct EarlierIds {
  const StepIds* ids = nullptr;
  std::vector<int32_t> rows, from;
};

class CausalLM {
 public:
  // `dir` is a model folder as the Hub ships it.
  static CausalLM from_pretrained(const std::string& dir, const LoadOptions& options = {});
  CausalLM(CausalLM&&) noexcept;
  CausalLM& operator=(CausalLM&&) noexcept;
  ~CausalLM();

  const ModelConfig& config() const;
  Device device() const;
  DType dtype() const;
  // Bytes of device memory the weights take.
  size_t weight_bytes() const;

  // A cache of `num_blocks` blocks of `block_size` tokens on the model's device, in its dtype.
  KVCache make_cache(int64_t num_blocks, int64_t block_size = kDefaultBlockSize) const;
  static constexpr int64_t kDefaultBlockSize = 16;

  // Runs one step and returns the float32 logits (R, vocab) of batch.logits_rows, on the host. With `saved`,
  // the layers keep in it what a backward pass needs.
  Tensor forward(const ForwardBatch& batch, KVCache& cache, SavedActivations* saved = nullptr);

  // Runs one step and returns the greedy choice (the first largest logit, as torch.argmax) of each row of
  // batch.logits_rows, chosen on the device where it has the kernel, so that only the ids come back; -1 for a
  // row whose logits hold a NaN or an infinity.
  std::vector<int64_t> greedy(const ForwardBatch& batch, KVCache& cache) { return queue_greedy(batch, cache).read(); }

  // Runs one step and returns each row's token chosen as `rows` (one per row of batch.logits_rows) say, on the
  // device where it has the kernel, so that only the ids come back; -1 for a row with no distribution to draw
  // from (a NaN or +inf, or every value -inf, after the penalties and temperature).
  std::vector<int64_t> sample(const ForwardBatch& batch, KVCache& cache, const std::vector<RowSampling>& rows) {
    return queue_sample(batch, cache, rows).read();
  }

  // A step whose rows are chosen in two places: each row of batch.logits_rows with settings in `rows` has its
  // token chosen on the device as sample() chooses it, and only the others' float32 logits come to the host,
  // as forward() returns them (a few requests that need their logits do not bring every row's back).
  struct SplitStep {
    std::optional<StepIds> chosen;  // one id per row with settings, in row order
    Tensor host_logits;             // (rows without settings, vocab), float32 on the host; empty when none
  };
  SplitStep split_step(const ForwardBatch& batch, KVCache& cache, const std::vector<std::optional<RowSampling>>& rows);

  // greedy() and sample() without waiting for the device: the step is queued and its ids read later, so that
  // the host can prepare and queue the next step meanwhile (asynchronous batching), whose rows may take their
  // ids from this one's (`earlier`).
  StepIds queue_greedy(const ForwardBatch& batch, KVCache& cache, const EarlierIds& earlier = {});
  StepIds queue_sample(const ForwardBatch& batch, KVCache& cache, const std::vector<RowSampling>& rows,
                       const EarlierIds& earlier = {});

  // Decode steps (one new token per sequence) run as device graphs where the device has them (cuda): each
  // batch size, rounded up to a power of two, is captured once per KV cache and replayed, so the host issues
  // one launch a step instead of one per kernel. On by default; off runs every step kernel by kernel.
  void set_device_graphs(bool enabled);
  bool device_graphs() const;

  // The weights, each once (a tied head is the embedding's parameter): what an optimizer updates and a
  // checkpoint saves.
  std::vector<Parameter> parameters() const;
  // Every linear layer but the head, in layer order.
  std::vector<LinearModule> linear_modules();
  // Transformers' causal LM loss of `batch` and its backward, in one step: each sequence's logits predict its
  // next labels (shifted by one, the last predicting nothing); the cross-entropy summed over labels that are not
  // -100 is returned with their count, and the gradient of (that sum times `grad_scale`) is added to `grads`'
  // accumulators (a parameter without one gets none). `recompute_layers` is activation checkpointing: each
  // layer's forward runs again in the backward instead of keeping its activations.
  StepLoss forward_backward(const std::vector<const TrainingExample*>& batch, float grad_scale, Gradients& grads,
                            bool recompute_layers = false);
  // The same loss without the backward (evaluation).
  StepLoss loss(const std::vector<const TrainingExample*>& batch);

  // Transformers' train() / eval(): with kernels in use, the layers switch to the variants registered for
  // the mode (kernelize's fallback to the default where a variant serves only the other).
  void train(bool mode = true);
  void eval() { train(false); }
  bool training() const;
  // Transformers' set_use_kernels(use_kernels, kernel_config): applied at once; false returns every layer to
  // its default kernels.
  void set_use_kernels(bool use_kernels, const KernelConfig& config = {});
  // The variant each layer kind runs now (layer kinds absent run their defaults).
  const LayerKernels& layer_kernels() const;

 private:
  struct Impl;
  explicit CausalLM(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfm

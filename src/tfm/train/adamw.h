// torch.optim.AdamW over a model's trainable tensors as Transformers' Trainer sets it up: weight decay on every
// tensor but biases and norms, gradient clipping by the global norm, float32 master weights and state. Where the
// model computes in float32 its tensors are the masters; in bfloat16 or float16 the optimizer keeps float32
// masters and writes each step's result back into the model's copies.
#pragma once

#include <string>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/model/layers.h"

namespace tfm {

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};

// Whether Trainer decays a parameter of this name: not biases and not norms (get_decay_parameter_names).
bool decays(const std::string& name);

// A tensor a run trains.
struct TrainedTensor {
  std::string name;                  // the gradient's name, as the layers ask for it
  Tensor value;                      // the model's tensor (on its device, in its dtype)
  std::vector<std::string> aliases;  // other names of the same gradient (a tied head)
};

class AdamW {
 public:
  // The model's trainable tensors (on one device), each with a zeroed gradient in gradients(). Gradients,
  // moments and float32 masters live in one arena of each kind, a view of it a tensor, so that the clipping
  // norm and the zeroing of the gradients are one launch each, however many tensors there are (LoRA trains
  // ~400 small ones); the step is one launch for each run of tensors that lie end to end in the model's
  // storage too (all of LoRA's, which share one buffer), and one a tensor where they are apart.
  AdamW(AdamWOptions options, const std::vector<TrainedTensor>& params);

  // The accumulators the backward adds to, by parameter name.
  Gradients& gradients() { return gradients_; }

  // The global L2 norm of the gradients, which hold the true ones times `loss_scale` (float16's loss scaling);
  // the next step divides them by loss_scale and, with max_norm > 0, scales them by max_norm / (norm + 1e-6)
  // when that is below 1 (torch.nn.utils.clip_grad_norm_).
  double clip_grad_norm(double max_norm, double loss_scale = 1.0);

  // One AdamW step at learning rate `lr`, then the gradients are zeroed.
  void step(double lr);
  // No step (gradients that overflowed float16): the gradients are zeroed.
  void skip_step();
  int64_t steps() const { return steps_; }

  // The state a checkpoint keeps (masters, exp_avg, exp_avg_sq by "<name>.<what>") and the step count;
  // restore() takes it back, an error naming what does not match.
  std::vector<std::pair<std::string, Tensor>> state() const;
  void restore(const std::vector<std::pair<std::string, Tensor>>& state, int64_t steps);

  struct Entry {
    std::string name;
    Tensor param;   // the model's tensor
    Tensor master;  // float32: param itself when the model computes in float32
    Tensor grad, exp_avg, exp_avg_sq;
    bool decay;
  };
  const std::vector<Entry>& entries() const { return entries_; }
  const Tensor& master(const std::string& name) const;  // an error naming it when it is not trained

 private:
  AdamWOptions options_;
  Tensor grads_;  // the arena every entry's grad views, padding included (zeros)
  std::vector<Entry> entries_;
  // entries_ joined where their tensors lie end to end in the model's storage and the arenas (continues()), a
  // step's launch each, named by their first: LoRA's adapters, which share one buffer, make one run.
  std::vector<Entry> runs_;
  Gradients gradients_;
  double grad_scale_ = 1.0;
  int64_t steps_ = 0;
};

}  // namespace tfm

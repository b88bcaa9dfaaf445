// The learning rate of each optimizer step, as Transformers' get_scheduler (optimization.py, 5.17.0) builds a
// torch LambdaLR: the rate of optimizer step k (0-based; LambdaLR steps once when it is built) is
// learning_rate * lambda(k).
#pragma once

#include <cstdint>
#include <optional>

#include "tfm/io/json.h"
#include "tfm/train/training_args.h"

namespace tfm {

class LRSchedule {
 public:
  // get_scheduler(type, optimizer with lr = base_lr, num_warmup_steps, num_training_steps, kwargs): the
  // kwargs are the scheduler's own arguments (num_cycles, power, lr_end, min_lr, num_decay_steps, ...),
  // checked as the scheduler's constructor checks them, with Transformers' messages. constant and
  // constant_with_warmup ignore them, as get_scheduler does.
  LRSchedule(SchedulerType type, double base_lr, int64_t num_warmup_steps, int64_t num_training_steps,
             const json::Object& kwargs = {});
  // Trainer.create_scheduler: the arguments' scheduler, rate and kwargs, and args.get_warmup_steps.
  static LRSchedule from_args(const TrainingArguments& args, int64_t num_training_steps);

  // The multiplier of the base rate at optimizer step `step` (LambdaLR's lr_lambda).
  double lr_lambda(int64_t step) const;
  double lr(int64_t step) const { return base_lr_ * lr_lambda(step); }

  int64_t num_warmup_steps() const { return num_warmup_steps_; }

 private:
  // Warmup and decay shapes of warmup_stable_decay.
  enum class Shape { linear, cosine, one_minus_sqrt };

  SchedulerType type_;
  double base_lr_;
  int64_t num_warmup_steps_;
  int64_t num_training_steps_;
  // The scheduler's arguments after its defaults; each type reads only its own.
  double num_cycles_ = 0.5;  // cosine_with_restarts defaults to 1
  double lr_end_ = 1e-7;
  double power_ = 1.0;
  double timescale_ = 0;
  double min_lr_rate_ = 0;
  std::optional<double> warmup_lr_rate_;
  double num_stable_steps_ = 0;
  double num_decay_steps_ = 0;
  Shape warmup_shape_ = Shape::linear;
  Shape decay_shape_ = Shape::cosine;
  double min_lr_ratio_ = 0;
};

}  // namespace tfm

// TrainingArguments: the fields of Transformers' TrainingArguments (training_args.py, read from Transformers
// 5.17.0) that tfm's Trainer acts on, with their names and defaults, read as HfArgumentParser reads them from
// a command line or a JSON file, and checked as TrainingArguments.__post_init__ checks them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/io/json.h"

namespace tfm {

// Transformers' IntervalStrategy (logging, evaluation) and SaveStrategy without "best", which needs
// metric_for_best_model and evaluation-driven saving that tfm does not have.
enum class IntervalStrategy { no, steps, epoch };

// Transformers' SchedulerType, less reduce_lr_on_plateau and greedy (they follow evaluation metrics).
enum class SchedulerType {
  linear,
  cosine,
  cosine_with_restarts,
  polynomial,
  constant,
  constant_with_warmup,
  inverse_sqrt,
  cosine_with_min_lr,
  cosine_warmup_with_min_lr,
  warmup_stable_decay,
};

std::string_view to_string(IntervalStrategy strategy);
std::string_view to_string(SchedulerType type);

struct TrainingArguments {
  std::string output_dir = "trainer_output";  // Transformers' default when none is given
  int64_t per_device_train_batch_size = 8;
  double num_train_epochs = 3.0;
  int64_t max_steps = -1;  // > 0 overrides num_train_epochs
  double learning_rate = 5e-5;
  SchedulerType lr_scheduler_type = SchedulerType::linear;
  std::optional<json::Object> lr_scheduler_kwargs;  // extra arguments of the scheduler (num_cycles, power, ...)
  // Transformers 5 has no warmup_ratio: a value below 1 is a ratio of the training steps (get_warmup_steps).
  double warmup_steps = 0;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  int64_t gradient_accumulation_steps = 1;
  double max_grad_norm = 1.0;  // 0 disables clipping
  bool bf16 = false;
  bool fp16 = false;
  bool gradient_checkpointing = false;
  IntervalStrategy logging_strategy = IntervalStrategy::steps;
  // The *_steps values below 1 are ratios of the training steps (TrainerState::compute_steps resolves them).
  double logging_steps = 500;
  bool logging_first_step = false;
  IntervalStrategy eval_strategy = IntervalStrategy::no;
  std::optional<double> eval_steps;  // logging_steps when unset (or 0) and eval_strategy is steps
  int64_t per_device_eval_batch_size = 8;
  IntervalStrategy save_strategy = IntervalStrategy::steps;
  double save_steps = 500;
  std::optional<int64_t> save_total_limit;  // unset or <= 0: keep every checkpoint
  int64_t seed = 42;
  std::optional<int64_t> data_seed;  // the shuffling seed; `seed` when unset
  bool use_cpu = false;
  bool dataloader_drop_last = false;
  // A checkpoint folder, or "true" for the last checkpoint in output_dir (see resolve_resume_checkpoint).
  std::optional<std::string> resume_from_checkpoint;
  // report_to is accepted and checked but not kept: tfm reports to no integration, so it is always [].

  // The `tfm train` entry point: the config file (HfArgumentParser.parse_json_file's semantics) when given,
  // then the command-line tokens the train command left (HfArgumentParser.parse_args_into_dataclasses's), which
  // override it; then validate(). Every error is a tfm::Error with Transformers' message where it has one:
  // unknown keys or flags, wrongly typed values (naming the flag or key), invalid combinations.
  static TrainingArguments parse(const std::vector<std::string>& tokens,
                                 const std::optional<std::string>& config_path = std::nullopt);
  // HfArgumentParser.parse_dict: the keys of a JSON object (unknown keys are an error naming them), then
  // validate().
  static TrainingArguments from_json(const json::Value& value);

  // TrainingArguments.__post_init__'s normalisation and checks: "~" in output_dir expanded, eval_steps from
  // logging_steps, *_steps above 1 made whole, fp16 with bf16 refused, ...
  void validate();

  // Transformers' get_warmup_steps: warmup_steps itself when >= 1, else ceil(num_training_steps * ratio).
  int64_t get_warmup_steps(int64_t num_training_steps) const;

  // The resolved arguments in Transformers' field order, as to_json_string() writes them (tfm's stand-in for
  // training_args.bin in a checkpoint).
  json::Value to_json() const;
};

}  // namespace tfm

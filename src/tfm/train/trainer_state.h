// TrainerState: the Trainer's progress as Transformers keeps it (trainer_callback.py, 5.17.0) and writes it to
// trainer_state.json in every checkpoint, which resume reads back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tfm/io/json.h"
#include "tfm/train/training_args.h"

namespace tfm {

struct TrainerState {
  double epoch = 0;  // fractional: 1.5 is half-way through the second epoch
  int64_t global_step = 0;  // optimizer steps done
  int64_t max_steps = 0;
  int64_t logging_steps = 500;
  int64_t eval_steps = 500;
  int64_t save_steps = 500;
  std::optional<int64_t> train_batch_size;
  int64_t num_train_epochs = 0;
  int64_t num_input_tokens_seen = 0;
  double total_flos = 0;
  // One entry per log: {"loss": ..., "grad_norm": ..., "learning_rate": ..., "epoch": ..., "step": ...}, or
  // the evaluation's metrics, or the end-of-training summary.
  std::vector<json::Object> log_history;
  std::optional<double> best_metric;
  std::optional<int64_t> best_global_step;
  std::optional<std::string> best_model_checkpoint;
  bool is_local_process_zero = true;
  bool is_world_process_zero = true;
  bool is_hyper_param_search = false;
  std::optional<std::string> trial_name;
  json::Value trial_params;  // null, or a dict
  // Callback name -> its state() ({"args": {...}, "attributes": {...}}); the Trainer writes its
  // TrainerControl's here.
  json::Object stateful_callbacks;

  // TrainerState.compute_steps: logging, eval and save steps from the arguments, a ratio below 1 made
  // ceil(max_steps * ratio); an unset eval_steps leaves the state's.
  void compute_steps(const TrainingArguments& args, int64_t max_steps);

  // The fields as dataclasses.asdict gives them (save_to_json sorts the keys).
  json::Value to_json() const;
  // Reads a trainer_state.json object; an unknown key or a wrongly typed field is a tfm::Error naming `source`
  // and the field, as Transformers fails on an unknown key.
  static TrainerState from_json(const json::Value& value, const std::string& source = "trainer_state.json");

  // save_to_json: indented by 2, keys sorted, a final newline; written to a temporary file then renamed, so a
  // crash leaves the old file or the new one, never half of one.
  void save_to_json(const std::string& path) const;
  static TrainerState load_from_json(const std::string& path);
};

}  // namespace tfm

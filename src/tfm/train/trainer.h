// Transformers' Trainer for causal LMs: micro-batches of the training examples in a seeded order per epoch,
// gradient accumulation over Trainer's num_items_in_batch, clipping, AdamW, the learning-rate schedule, logs,
// evaluation, checkpoints (written whole or not at all, rotated) and resume that continues the same run.
// What it trains is given as TrainedWeights: the model's own weights, or adapters (LoRA).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tfm/io/json.h"
#include "tfm/model/causal_lm.h"
#include "tfm/model/lora.h"
#include "tfm/train/adamw.h"
#include "tfm/train/trainer_state.h"
#include "tfm/train/training_args.h"

namespace tfm {

// The tensors a run trains and how its checkpoints and final folder hold them.
struct TrainedWeights {
  std::vector<TrainedTensor> tensors;
  // Writes the weights into a folder (model files or adapter files); the optimizer has the float32 masters.
  std::function<void(const std::string& dir, const AdamW& optimizer)> save;
  // Loads the weights of a checkpoint folder that `save` wrote into the model's tensors.
  std::function<void(const std::string& dir)> load;
};

// Every weight of the model (full fine-tuning): saved as model.safetensors under the checkpoint's names in
// float32 (the masters), with config.json, generation_config.json and the tokenizer files of `model_dir`.
TrainedWeights full_model_weights(CausalLM& model, const std::string& model_dir);

// LoRA adapters on `model` (attached with PEFT's initialisation from `seed`): saved as PEFT saves them
// (adapter_model.safetensors, adapter_config.json) beside the tokenizer files of `model_dir`.
TrainedWeights lora_weights(CausalLM& model, const LoraConfig& config, uint64_t seed, const std::string& model_dir);

// What a log line or the final summary reports, as Transformers' log_history entries.
using LogEntry = json::Object;

class Trainer {
 public:
  Trainer(CausalLM& model, TrainingArguments args, TrainedWeights weights, std::vector<TrainingExample> train,
          std::vector<TrainingExample> eval = {});

  // Called with each log entry as it is made (training logs every logging_steps, evaluations, the summary).
  void on_log(std::function<void(const LogEntry&)> f) { on_log_ = std::move(f); }

  // Trains from the start or from args.resume_from_checkpoint, saves the final weights into output_dir and
  // returns the summary (train_runtime, train_loss, ...).
  LogEntry train();

  // The mean loss per label of the evaluation examples, as Trainer.evaluate reports it ({"eval_loss": ...}).
  LogEntry evaluate();

  const TrainerState& state() const { return state_; }

 private:
  void log(LogEntry entry);
  void save_checkpoint();
  void resume_from(const std::string& checkpoint);

  CausalLM& model_;
  TrainingArguments args_;
  TrainedWeights weights_;
  std::vector<TrainingExample> train_, eval_;
  AdamW optimizer_;
  TrainerState state_;
  std::function<void(const LogEntry&)> on_log_;
  double loss_scale_ = 1.0;  // float16's dynamic loss scale
  int64_t good_steps_ = 0;   // since the loss scale last changed
};

}  // namespace tfm

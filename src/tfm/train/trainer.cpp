#include "tfm/train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/io/file.h"
#include "tfm/io/progress_bar.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/weights.h"
#include "tfm/ops/ops.h"
#include "tfm/train/batches.h"
#include "tfm/train/checkpoint_folder.h"
#include "tfm/train/lr_schedule.h"

namespace tfm {
namespace fs = std::filesystem;
namespace {

// The files of a model folder an adapter folder carries, as Trainer saves the tokenizer beside it.
constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                           "chat_template.jinja", "vocab.json", "merges.txt", "tokenizer.model",
                                           "added_tokens.json"};

void copy_tokenizer_files(const std::string& from, const std::string& to) {
  for (const char* name : kTokenizerFiles) {
    const fs::path src = fs::path(from) / name;
    if (fs::exists(src)) fs::copy_file(src, fs::path(to) / name, fs::copy_options::overwrite_existing);
  }
}

// The model folder's files but its weights, config.json as save_pretrained writes it for float32 weights.
void copy_model_files(const std::string& from, const std::string& to) {
  copy_model_files_but_weights(from, to);
  json::Value config = json::parse_file((fs::path(from) / "config.json").string());
  for (const char* key : {"dtype", "torch_dtype"})
    if (json::Value* v = config.find(key)) *v = "float32";
  io::write_file_atomically((fs::path(to) / "config.json").string(), json::dump(config) + "\n");
}

// Copies a checkpoint's tensors into the model's of the same names (their shapes checked), in its dtype.
void load_into(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  const SafetensorsFile file = SafetensorsFile::open(path);
  for (const auto& [name, dst] : tensors) {
    const Tensor saved = file.get(name);
    check(saved.shape() == dst.shape(), file.path(), ": ", name, " is ", shape_str(saved.shape()),
          ", the model's is ", shape_str(dst.shape()));
    Tensor converted = Tensor::cpu(saved.shape(), dst.dtype());
    ops::cast(saved, converted);
    copy(dst, to_device(converted, dst.device()));
  }
}

// Labels a sequence's logits are scored against: its labels after the first that are not ignored.
int64_t count_items(const TrainingExample& e) {
  int64_t n = 0;
  for (size_t i = 1; i < e.labels.size(); ++i) n += e.labels[i] != kIgnoreIndex;
  return n;
}

int64_t count_items(const MicroBatch& b) {
  int64_t n = 0;
  for (const TrainingExample* e : b.examples) n += count_items(*e);
  return n;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Float16's dynamic loss scale, as torch.amp.GradScaler runs it by default.
constexpr double kInitialLossScale = 65536.0;
constexpr int64_t kLossScaleGrowthInterval = 2000;

}  // namespace

TrainedWeights full_model_weights(CausalLM& model, const std::string& model_dir) {
  TrainedWeights w;
  const std::vector<Parameter> params = model.parameters();
  for (const Parameter& p : params) {
    TrainedTensor t{p.name, p.value, {}};
    if (p.name == "model.embed_tokens.weight" && model.config().tie_word_embeddings) t.aliases = {"lm_head.weight"};
    w.tensors.push_back(std::move(t));
  }
  w.save = [params, model_dir](const std::string& dir, const AdamW& optimizer) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const Parameter& p : params) {
      const auto parts = p.checkpoint_tensors(to_device(optimizer.master(p.name), Device{}));
      tensors.insert(tensors.end(), parts.begin(), parts.end());
    }
    save_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
    copy_model_files(model_dir, dir);
  };
  w.load = [params](const std::string& dir) {
    std::vector<std::pair<std::string, Tensor>> parts;
    for (const Parameter& p : params) {
      const auto blocks = p.checkpoint_tensors(p.value);
      parts.insert(parts.end(), blocks.begin(), blocks.end());
    }
    load_into((fs::path(dir) / "model.safetensors").string(), parts);
  };
  return w;
}

TrainedWeights lora_weights(CausalLM& model, const LoraConfig& config, uint64_t seed, const std::string& model_dir) {
  TrainedWeights w;
  const std::vector<std::pair<std::string, Tensor>> tensors = attach_lora(model, config, seed);
  for (const auto& [name, value] : tensors) w.tensors.push_back({name, value, {}});
  // The adapter's tensors are the model's (PEFT saves the adapters in the dtype they compute in).
  w.save = [&model, config, model_dir](const std::string& dir, const AdamW&) {
    save_adapter(model, config, dir);
    copy_tokenizer_files(model_dir, dir);
  };
  w.load = [tensors](const std::string& dir) { load_into((fs::path(dir) / "adapter_model.safetensors").string(), tensors); };
  return w;
}

Trainer::Trainer(CausalLM& model, TrainingArguments args, TrainedWeights weights,
                 std::vector<TrainingExample> train, std::vector<TrainingExample> eval)
    : model_(model),
      args_(std::move(args)),
      weights_(std::move(weights)),
      train_(std::move(train)),
      eval_(std::move(eval)),
      optimizer_(AdamWOptions{args_.adam_beta1, args_.adam_beta2, args_.adam_epsilon, args_.weight_decay},
                 weights_.tensors) {
  check(!train_.empty(), "the training data has no examples");
  if (args_.fp16) loss_scale_ = kInitialLossScale;
}

void Trainer::log(LogEntry entry) {
  entry.emplace_back("epoch", state_.epoch);
  entry.emplace_back("step", state_.global_step);
  state_.log_history.push_back(entry);
  if (on_log_) on_log_(entry);
}

LogEntry Trainer::train() {
  model_.train();
  const auto start = std::chrono::steady_clock::now();
  const int64_t batch_size = args_.per_device_train_batch_size, accumulation = args_.gradient_accumulation_steps;
  const int64_t n = static_cast<int64_t>(train_.size());
  const int64_t batches_per_epoch = args_.dataloader_drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
  check(batches_per_epoch > 0, "the training data (", n, " examples) holds no batch of ", batch_size,
        " with dataloader_drop_last");
  // Trainer's step arithmetic: optimizer steps per epoch, and the epochs max_steps takes.
  const int64_t updates_per_epoch = std::max<int64_t>((batches_per_epoch + accumulation - 1) / accumulation, 1);
  int64_t max_steps = 0, epochs = 0;
  if (args_.max_steps > 0) {
    max_steps = args_.max_steps;
    epochs = (max_steps + updates_per_epoch - 1) / updates_per_epoch;
  } else {
    max_steps = static_cast<int64_t>(std::ceil(args_.num_train_epochs * static_cast<double>(updates_per_epoch)));
    epochs = static_cast<int64_t>(std::ceil(args_.num_train_epochs));
  }
  state_ = TrainerState{};
  state_.max_steps = max_steps;
  state_.num_train_epochs = epochs;
  state_.train_batch_size = batch_size;
  state_.compute_steps(args_, max_steps);
  const LRSchedule schedule = LRSchedule::from_args(args_, max_steps);
  int64_t scheduler_steps = 0;  // the schedule's own count: a float16 step that overflowed does not advance it
  if (const auto checkpoint = resolve_resume_checkpoint(args_.resume_from_checkpoint, args_.output_dir)) {
    resume_from(*checkpoint);
    scheduler_steps = optimizer_.steps();
  }
  const int64_t first_epoch = state_.global_step / updates_per_epoch;
  const int64_t skipped_updates = state_.global_step % updates_per_epoch;

  io::ProgressBar bar("", max_steps, state_.global_step, !io::progress_bars_disabled(), io::ProgressUnit::items);
  double window_loss = 0, total_loss = 0;
  int64_t last_logged = state_.global_step;
  const uint64_t seed = static_cast<uint64_t>(args_.data_seed.value_or(args_.seed));
  bool stop = state_.global_step >= max_steps;
  for (int64_t epoch = first_epoch; epoch < epochs && !stop; ++epoch) {
    const std::vector<MicroBatch> batches =
        micro_batches(train_, epoch_order(n, seed, epoch), batch_size, args_.dataloader_drop_last);
    const int64_t steps_in_epoch = static_cast<int64_t>(batches.size());
    for (int64_t update = epoch == first_epoch ? skipped_updates : 0; update < updates_per_epoch && !stop; ++update) {
      const int64_t begin = update * accumulation, end = std::min(begin + accumulation, steps_in_epoch);
      int64_t items = 0;  // Trainer's num_items_in_batch: the labels of every micro-batch of this step
      for (int64_t b = begin; b < end; ++b) items += count_items(batches[b]);
      for (int64_t b = begin; b < end; ++b) {
        const float grad_scale = items ? static_cast<float>(loss_scale_ / static_cast<double>(items)) : 0.f;
        const StepLoss loss =
            model_.forward_backward(batches[b].examples, grad_scale, optimizer_.gradients(), args_.gradient_checkpointing);
        window_loss += items ? loss.loss_sum / static_cast<double>(items) : 0.0;
      }
      const double grad_norm = optimizer_.clip_grad_norm(args_.max_grad_norm, loss_scale_);
      const double lr = schedule.lr(scheduler_steps);
      if (args_.fp16 && !std::isfinite(grad_norm)) {  // GradScaler: skip the step, halve the scale
        optimizer_.skip_step();
        loss_scale_ /= 2;
        good_steps_ = 0;
      } else {
        optimizer_.step(lr);
        ++scheduler_steps;
        if (args_.fp16 && ++good_steps_ == kLossScaleGrowthInterval) {
          loss_scale_ *= 2;
          good_steps_ = 0;
        }
      }
      ++state_.global_step;
      state_.epoch = static_cast<double>(epoch) + static_cast<double>(end) / static_cast<double>(steps_in_epoch);
      bar.update(1);

      // DefaultFlowCallback's decisions.
      const int64_t step = state_.global_step;
      stop = step >= max_steps;
      const bool by_steps = args_.logging_strategy == IntervalStrategy::steps;
      const bool last_of_epoch = update + 1 == updates_per_epoch;
      const bool should_log = (step == 1 && args_.logging_first_step) ||
                              (by_steps && state_.logging_steps > 0 && step % state_.logging_steps == 0) ||
                              (args_.logging_strategy == IntervalStrategy::epoch && last_of_epoch);
      const bool steps_eval = args_.eval_strategy == IntervalStrategy::steps;
      const bool should_evaluate = !eval_.empty() &&
                                   ((steps_eval && (step % state_.eval_steps == 0 || stop)) ||
                                    (args_.eval_strategy == IntervalStrategy::epoch && last_of_epoch));
      const bool should_save =
          (args_.save_strategy == IntervalStrategy::steps && ((state_.save_steps > 0 && step % state_.save_steps == 0) || stop)) ||
          (args_.save_strategy == IntervalStrategy::epoch && last_of_epoch);
      if (should_log && step > last_logged) {
        total_loss += window_loss;
        log({{"loss", window_loss / static_cast<double>(step - last_logged)},
             {"grad_norm", grad_norm},
             {"learning_rate", lr}});
        window_loss = 0;
        last_logged = step;
      }
      if (should_evaluate) log(evaluate());
      if (should_save) save_checkpoint();
    }
  }
  total_loss += window_loss;
  const double runtime = seconds_since(start);
  LogEntry summary{{"train_runtime", runtime},
                   {"train_samples_per_second", static_cast<double>(n) * static_cast<double>(epochs) / runtime},
                   {"train_steps_per_second", static_cast<double>(state_.global_step) / runtime},
                   {"total_flos", 0.0},
                   {"train_loss", total_loss / std::max<double>(static_cast<double>(state_.global_step), 1e-3)}};
  log(summary);
  fs::create_directories(args_.output_dir);
  weights_.save(args_.output_dir, optimizer_);
  state_.save_to_json((fs::path(args_.output_dir) / "trainer_state.json").string());
  return summary;
}

LogEntry Trainer::evaluate() {
  check(!eval_.empty(), "evaluate: no evaluation data");
  const bool was_training = model_.training();
  model_.eval();
  const auto start = std::chrono::steady_clock::now();
  std::vector<int64_t> order(eval_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  // Trainer's eval_loss: each batch's mean loss per label, weighted by the batch's examples.
  double weighted = 0;
  int64_t examples = 0, batches = 0;
  for (const MicroBatch& b : micro_batches(eval_, order, args_.per_device_eval_batch_size, false)) {
    const StepLoss loss = model_.loss(b.examples);
    ++batches;
    if (loss.items == 0) continue;
    const auto size = static_cast<int64_t>(b.examples.size());
    weighted += loss.loss_sum / static_cast<double>(loss.items) * static_cast<double>(size);
    examples += size;
  }
  model_.train(was_training);
  const double runtime = seconds_since(start);
  return {{"eval_loss", examples ? weighted / static_cast<double>(examples) : std::nan("")},
          {"eval_runtime", runtime},
          {"eval_samples_per_second", static_cast<double>(eval_.size()) / runtime},
          {"eval_steps_per_second", static_cast<double>(batches) / runtime}};
}

void Trainer::save_checkpoint() {
  fs::create_directories(args_.output_dir);
  CheckpointWriter writer(args_.output_dir, state_.global_step);
  const fs::path dir = writer.dir();
  weights_.save(dir.string(), optimizer_);
  save_safetensors(
      (dir / "optimizer.safetensors").string(), on_host(optimizer_.state()),
      {{"steps", std::to_string(optimizer_.steps())}, {"loss_scale", json::dump(json::Value(loss_scale_))}});
  state_.save_to_json((dir / "trainer_state.json").string());
  io::write_file_atomically((dir / "training_args.json").string(), json::dump(args_.to_json()) + "\n");
  writer.commit();
  rotate_checkpoints(args_.output_dir, args_.save_total_limit);
}

void Trainer::resume_from(const std::string& checkpoint) {
  const fs::path dir(checkpoint);
  const TrainerState saved = TrainerState::load_from_json((dir / "trainer_state.json").string());
  state_.global_step = saved.global_step;
  state_.epoch = saved.epoch;
  state_.log_history = saved.log_history;
  weights_.load(checkpoint);
  const SafetensorsFile file = SafetensorsFile::open((dir / "optimizer.safetensors").string());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const TensorInfo& t : file.tensors()) tensors.emplace_back(t.name, file.get(t.name));
  const json::Value* steps = file.metadata().find("steps");
  const json::Value* scale = file.metadata().find("loss_scale");
  check(steps && scale, file.path(), " has no steps or loss_scale in its metadata");
  optimizer_.restore(tensors, json::parse(steps->as_string()).as_int());
  loss_scale_ = json::parse(scale->as_string()).as_double();
}

}  // namespace tfm

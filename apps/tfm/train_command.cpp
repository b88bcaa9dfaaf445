#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>

#include "commands.h"
#include "model_args.h"
#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/tokenizer/chat_template.h"
#include "tfm/train/dataset.h"
#include "tfm/train/trainer.h"

namespace tfm::cli {
namespace {

// The device TrainingArguments gives (use_cpu, else the first accelerator), and Transformers' bf16 check.
Device training_device(const TrainingArguments& args) {
  const Device device = resolve_device(args.use_cpu ? "cpu" : "auto");
  // Transformers asks the accelerator (is_torch_bf16_gpu_available): the cpu qualifies only with use_cpu.
  if (args.bf16 && !args.use_cpu && (device.type == DeviceType::cpu || !is_bf16_supported(device))) {
    Backend* cuda = find_backend(DeviceType::cuda);
    throw_error("Your setup doesn't support bf16/gpu.",
                cuda && cuda->device_count() > 0 ? " You need Ampere+ GPU with cuda>=11.0" : "");
  }
  return device;
}

TrainingDataset load_data(const std::string& path, const std::string& model_dir, const tokenizer::Tokenizer& tok,
                          int64_t max_seq_length) {
  TrainingDataset data = load_training_dataset(path, tok, load_chat_templates(model_dir, tok.config()), max_seq_length);
  if (data.skipped_records > 0)
    std::cerr << path << ": " << data.skipped_records << " conversations have no assistant token within "
              << max_seq_length << " tokens and are left out\n";
  return data;
}

// LoraConfig from the --lora-* flags; nullopt for full fine-tuning (no LoRA flag given).
std::optional<LoraConfig> read_lora_args(Args& args, const std::string& model_id) {
  const auto r = args.get_int("lora-r");
  const auto alpha = args.get_double("lora-alpha");
  const auto dropout = args.get_double("lora-dropout");
  const auto targets = args.get("lora-target-modules");
  const bool rslora = args.flag("use-rslora");
  if (!r && !alpha && !dropout && !targets && !rslora) return std::nullopt;
  json::Object config{{"r", r.value_or(8)},
                      {"lora_alpha", alpha.value_or(8.0)},
                      {"lora_dropout", dropout.value_or(0.0)},
                      {"use_rslora", rslora},
                      {"base_model_name_or_path", model_id}};
  if (targets) {
    if (*targets == "all-linear") {
      config.emplace_back("target_modules", *targets);
    } else {  // names, comma-separated, as PEFT's list
      json::Array names;
      for (size_t start = 0; start <= targets->size();) {
        const size_t comma = std::min(targets->find(',', start), targets->size());
        check(comma > start, "--lora-target-modules: an empty module name in '", *targets, "'");
        names.emplace_back(targets->substr(start, comma - start));
        start = comma + 1;
      }
      config.emplace_back("target_modules", std::move(names));
    }
  }
  return LoraConfig::from_json(json::Value(std::move(config)), "the --lora-* options");
}

int run(Args& args) {
  ModelArgs m = read_model_args(args, ModelUse::train);
  const std::optional<LoraConfig> lora = read_lora_args(args, m.id);
  const auto data = args.get("data");
  const auto eval_data = args.get("eval-data");
  const auto max_seq_length_arg = args.get_int("max-seq-length");
  const auto config = args.get("config");
  const TrainingArguments training = TrainingArguments::parse(args.take_unused(), config);
  args.finish();
  check(data.has_value(), "give the training data: --data FILE.jsonl");

  const Device device = training_device(training);
  LoadOptions load;
  load.device = device.str();
  load.dtype = training.bf16 ? "bfloat16" : training.fp16 ? "float16" : "float32";
  load.progress = !args.quiet();
  if (!args.quiet())
    std::cerr << "training on " << device.str() << " in " << load.dtype
              << (load.dtype == "float32" ? "" : " with float32 master weights") << "\n";
  CausalLM model = CausalLM::from_pretrained(m.dir, load);
  const tokenizer::Tokenizer tok = tokenizer::AutoTokenizer::from_pretrained(m.dir, m.id);
  // run_clm's block size when none is given: the tokenizer's model_max_length, at most 1024.
  const int64_t max_seq_length =
      max_seq_length_arg.value_or(std::min<int64_t>({1024, tok.model_max_length(), model.config().max_position_embeddings}));
  TrainingDataset train = load_data(*data, m.dir, tok, max_seq_length);
  std::vector<TrainingExample> eval;
  if (eval_data) eval = load_data(*eval_data, m.dir, tok, max_seq_length).examples;

  TrainedWeights weights = lora ? lora_weights(model, *lora, static_cast<uint64_t>(training.seed), m.dir)
                                : full_model_weights(model, m.dir);
  Trainer trainer(model, training, std::move(weights), std::move(train.examples), std::move(eval));
  trainer.on_log([](const LogEntry& entry) { std::cout << json::dump_compact(json::Value(entry)) << std::endl; });
  trainer.train();
  if (eval_data) {  // run_clm's final evaluation, with its perplexity
    LogEntry metrics = trainer.evaluate();
    const double loss = metrics.front().second.as_double();
    metrics.emplace_back("perplexity", std::exp(loss));
    std::cout << json::dump_compact(json::Value(metrics)) << std::endl;
  }
  return 0;
}

}  // namespace

const Command kTrainCommand{
    "train", "fine-tune a model on a JSON Lines file (Transformers' Trainer)",
    "usage: tfm train --model ID|DIR --data FILE.jsonl [--eval-data FILE.jsonl] [--max-seq-length N]\n"
    "                 --output-dir DIR [TrainingArguments flags] [--config args.json]\n\n"
    "Trains as Transformers' Trainer does and writes what it writes: checkpoint-N folders every save_steps\n"
    "(resume with --resume_from_checkpoint DIR|true) and the final model in output_dir, which `tfm generate\n"
    "--model` loads. Records hold \"text\" (tokenized and packed into blocks of --max-seq-length tokens, as\n"
    "run_clm.py does) or \"messages\" (rendered by the chat template; the loss is taken on the assistant's\n"
    "tokens). One JSON object per log on stdout ({\"loss\", \"grad_norm\", \"learning_rate\", \"epoch\",\n"
    "\"step\"}); with --eval-data, eval_loss and perplexity.\n\n"
    "The device is the one Transformers picks (--use_cpu for the cpu). --bf16 or --fp16 compute in that dtype\n"
    "with float32 master weights; otherwise float32.\n\noptions:\n"
    "  --data FILE.jsonl           training records\n"
    "  --eval-data FILE.jsonl      evaluation records\n"
    "  --max-seq-length N          tokens per block (default: min(1024, the tokenizer's model_max_length))\n"
    "  --config FILE               TrainingArguments as JSON (flags override it)\n"
    "  --lora-r N                  train LoRA adapters of rank N (default 8 with any --lora option) instead of\n"
    "                              the weights; saved as PEFT saves them (adapter_config.json,\n"
    "                              adapter_model.safetensors), for --adapter DIR and `tfm merge-adapter`\n"
    "  --lora-alpha A              scaling numerator (default 8)\n"
    "  --lora-dropout P            dropout on the adapters' input while training (default 0)\n"
    "  --lora-target-modules M     comma-separated module names (q_proj,v_proj: PEFT's default) or all-linear\n"
    "  --use-rslora                scale by alpha / sqrt(r) instead of alpha / r\n"
    "  TrainingArguments flags     as HfArgumentParser takes them: --learning_rate 1e-4 or --learning-rate 1e-4,\n"
    "                              --num_train_epochs, --max_steps, --per_device_train_batch_size,\n"
    "                              --gradient_accumulation_steps, --lr_scheduler_type, --warmup_steps,\n"
    "                              --weight_decay, --max_grad_norm, --logging_steps, --save_steps,\n"
    "                              --save_total_limit, --eval_strategy, --eval_steps, --seed, --bf16, --fp16,\n"
    "                              --gradient_checkpointing, --resume_from_checkpoint, --use_cpu, ...\n" +
        std::string(kModelHelp),
    run};

}  // namespace tfm::cli

// The public API, named as Transformers names it:
//
//   auto model = tfm::AutoModelForCausalLM::from_pretrained("Qwen/Qwen3-0.6B", {.dtype = "auto", .device_map
//   = "auto"}); auto tokenizer = tfm::AutoTokenizer::from_pretrained("Qwen/Qwen3-0.6B"); auto generated =
//   model.generate({tokenizer.encode("A list of colors: red, blue")}); std::string text =
//   tokenizer.decode(generated.tokens[0], /*skip_special_tokens=*/true);
//
// A model or tokenizer is named by a local folder or a Hub id (downloaded into the huggingface_hub cache).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tfm/generate/generate.h"
#include "tfm/io/json.h"
#include "tfm/model/causal_lm.h"
#include "tfm/tokenizer/tokenizer.h"

namespace tfm {

struct PretrainedOptions {
  std::string dtype = "auto";  // "auto", "float32", "bfloat16", "float16"
  // "auto", "cpu", "cuda", "cuda:1", "xpu:0". Unset means what Transformers does without it: the cpu for
  // from_pretrained, the first accelerator for pipeline().
  std::optional<std::string> device_map;
  std::string attn_implementation = "sdpa";  // "eager", "sdpa", "flash_attention_2", "flash_attention_3"
  std::string revision = "main";             // for Hub ids: a branch, tag or commit
  bool use_kernels = false;                  // the built-in kernel mapping, as Transformers' use_kernels=True
  KernelConfig kernel_config{};              // per layer kind, the kernel variant; implies use_kernels
  bool progress = true;                      // the "Loading weights" bar on stderr for loads over a second
  bool device_graphs = true;                 // decode steps as device graphs where the device has them
  std::string adapter{};                     // a PEFT LoRA adapter folder to load on the model, when set
};

// Resolves a local folder or Hub id to a local folder, downloading what a model needs (without `weights`,
// what its tokenizer needs).
std::string resolve_pretrained(const std::string& id_or_dir, const std::string& revision = "main",
                               bool weights = true);

class AutoModelForCausalLM {
 public:
  static AutoModelForCausalLM from_pretrained(const std::string& id_or_dir,
                                              const PretrainedOptions& options = {});

  // Continues each prompt (token ids); `kwargs` override generation_config.json as generate(**kwargs) does.
  GenerateOutput generate(const std::vector<std::vector<int64_t>>& input_ids, const json::Object& kwargs = {},
                          const GenerateCallbacks& callbacks = {});

  CausalLM& model() { return model_; }
  Device device() const { return model_.device(); }
  const GenerationConfig& generation_config() const { return generation_config_; }
  const std::string& name_or_path() const { return name_or_path_; }
  const std::string& dir() const { return dir_; }  // the local folder it was loaded from

 private:
  AutoModelForCausalLM(CausalLM model, GenerationConfig generation_config, std::string name_or_path,
                       std::string dir);
  CausalLM model_;
  GenerationConfig generation_config_;
  std::string name_or_path_;
  std::string dir_;
};

struct AutoTokenizer {
  static tokenizer::Tokenizer from_pretrained(const std::string& id_or_dir,
                                              const std::string& revision = "main");
};

// pipeline("text-generation", model): text in, text out, as Transformers' TextGenerationPipeline
// (return_full_text=True: the prompt followed by its continuation).
class TextGenerationPipeline {
 public:
  TextGenerationPipeline(AutoModelForCausalLM model, tokenizer::Tokenizer tokenizer);
  std::string operator()(const std::string& prompt, const json::Object& kwargs = {});
  // A chat: messages as [{"role", "content"}]; returns them with the assistant's answer appended.
  json::Value operator()(const json::Value& messages, const json::Object& kwargs = {});

  AutoModelForCausalLM& model() { return model_; }
  tokenizer::Tokenizer& tokenizer() { return tokenizer_; }

 private:
  AutoModelForCausalLM model_;
  tokenizer::Tokenizer tokenizer_;
};

TextGenerationPipeline pipeline(const std::string& task, const std::string& model,
                                const PretrainedOptions& options = {});

}  // namespace tfm

#include "tfm/generate/auto.h"

#include "tfm/core/error.h"
#include "tfm/io/hub.h"
#include "tfm/model/lora.h"
#include "tfm/tokenizer/chat_template.h"

namespace tfm {

std::string resolve_pretrained(const std::string& id_or_dir, const std::string& revision, bool weights) {
  io::HubOptions hub;
  hub.revision = revision;
  hub.weights = weights;
  return io::resolve_model_dir(id_or_dir, hub);
}

AutoModelForCausalLM::AutoModelForCausalLM(CausalLM model, GenerationConfig generation_config,
                                           std::string name_or_path, std::string dir)
    : model_(std::move(model)),
      generation_config_(std::move(generation_config)),
      name_or_path_(std::move(name_or_path)),
      dir_(std::move(dir)) {}

AutoModelForCausalLM AutoModelForCausalLM::from_pretrained(const std::string& id_or_dir,
                                                           const PretrainedOptions& options) {
  const std::string dir = resolve_pretrained(id_or_dir, options.revision);
  CausalLM model = CausalLM::from_pretrained(dir, {.dtype = options.dtype,
                                                  .device = options.device_map.value_or("cpu"),
                                                  .attn_implementation = options.attn_implementation,
                                                  .use_kernels = options.use_kernels,
                                                  .kernel_config = options.kernel_config,
                                                  .progress = options.progress,
                                                  .device_graphs = options.device_graphs});
  if (!options.adapter.empty()) load_adapter(model, options.adapter);
  GenerationConfig generation_config = load_generation_config(dir, model.config());
  return AutoModelForCausalLM(std::move(model), std::move(generation_config), id_or_dir, dir);
}

GenerateOutput AutoModelForCausalLM::generate(const std::vector<std::vector<int64_t>>& input_ids,
                                              const json::Object& kwargs,
                                              const GenerateCallbacks& callbacks) {
  return tfm::generate(model_, input_ids, generation_config_, kwargs, callbacks);
}

tokenizer::Tokenizer AutoTokenizer::from_pretrained(const std::string& id_or_dir,
                                                    const std::string& revision) {
  return tokenizer::AutoTokenizer::from_pretrained(resolve_pretrained(id_or_dir, revision, /*weights=*/false),
                                                   id_or_dir);
}

TextGenerationPipeline::TextGenerationPipeline(AutoModelForCausalLM model, tokenizer::Tokenizer tokenizer)
    : model_(std::move(model)), tokenizer_(std::move(tokenizer)) {}

namespace {
// The pipeline's defaults under the caller's keyword arguments: max_new_tokens 256, as Transformers'
// pipeline.
json::Object with_pipeline_defaults(const json::Object& kwargs) {
  json::Value merged = json::Object{{"max_new_tokens", 256}};
  for (const auto& [k, v] : kwargs) merged.set(k, v);
  return merged.as_object();
}
}  // namespace

std::string TextGenerationPipeline::operator()(const std::string& prompt, const json::Object& kwargs) {
  const GenerateOutput out = model_.generate({tokenizer_.encode(prompt)}, with_pipeline_defaults(kwargs));
  return prompt + tokenizer_.decode(out.tokens[0], /*skip_special_tokens=*/true);
}

json::Value TextGenerationPipeline::operator()(const json::Value& messages, const json::Object& kwargs) {
  ChatTemplateInputs inputs;
  inputs.messages = messages;
  inputs.add_generation_prompt = true;
  const std::string text = apply_chat_template(load_chat_templates(model_.dir(), tokenizer_.config()),
                                               tokenizer_.config(), inputs);
  const GenerateOutput out = model_.generate({tokenizer_.encode(text, /*add_special_tokens=*/false)},
                                             with_pipeline_defaults(kwargs));
  json::Value answer;
  answer.set("role", "assistant");
  answer.set("content", tokenizer_.decode(out.tokens[0], /*skip_special_tokens=*/true));
  json::Value result = messages;
  result.as_array().push_back(std::move(answer));
  return result;
}

TextGenerationPipeline pipeline(const std::string& task, const std::string& model,
                                const PretrainedOptions& options) {
  check(task == "text-generation", "pipeline task '", task,
        "' is not supported (supported: text-generation)");
  PretrainedOptions placed = options;
  if (!placed.device_map) placed.device_map = "auto";
  return TextGenerationPipeline(AutoModelForCausalLM::from_pretrained(model, placed),
                                AutoTokenizer::from_pretrained(model, options.revision));
}

}  // namespace tfm

// Chat templates as Transformers applies them: found in a model folder (tokenizer_config.json's
// "chat_template", chat_template.jinja, additional_chat_templates/*.jinja), chosen by name or by the presence
// of tools, and rendered by the Jinja interpreter in the environment Transformers sets up (trim_blocks,
// lstrip_blocks, its tojson, raise_exception, strftime_now, loop controls, the generation tag).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tfm/io/json.h"
#include "tfm/jinja/template.h"

namespace tfm {

// A folder's templates: Transformers keeps one template as a string, several as a dict by name.
struct ChatTemplates {
  std::vector<std::pair<std::string, std::string>> named;  // several: name -> source
  std::optional<std::string> single;                       // just one
  bool empty() const { return named.empty() && !single; }
};

// Loads as AutoTokenizer.from_pretrained does: chat_template.jinja (the default) and
// additional_chat_templates/<name>.jinja take priority over tokenizer_config.json's "chat_template" (a
// string, or a list of {"name", "template"}). A legacy chat_template.json ({"chat_template": ...}, read by
// Transformers' processors) is used when neither gives a template.
ChatTemplates load_chat_templates(const std::string& model_dir, const json::Value& tokenizer_config);

struct ChatTemplateInputs {
  json::Value messages =
      json::Array{};  // [{"role", "content" (a string or a list of parts), "tool_calls"...}]
  bool add_generation_prompt = false;
  std::optional<json::Value> tools;      // a list of JSON schemas; absent: None
  std::optional<json::Value> documents;  // a list of dicts; absent: None
  json::Object variables;                // other keyword arguments, e.g. enable_thinking
  // Transformers' continue_final_message: the field of the last message (true there means "content") that the
  // rendering must end with, open for the model to continue. Absent: false.
  std::optional<std::string> continue_final_message;
  // Transformers' chat_template argument: a template's name, or (when no template has that name) the
  // template source itself. Absent: the "tool_use" template when tools are given and it exists, else
  // "default".
  std::optional<std::string> chat_template;
};

// A folder's tokenizer_config.json (an empty object when absent). Without "added_tokens_decoder" (a legacy
// config), special_tokens_map.json's entries override it, as Transformers merges them.
json::Value read_tokenizer_config(const std::string& model_dir);

// The template source Transformers' get_chat_template picks. Throws when there is none.
std::string select_chat_template(const ChatTemplates& templates, const ChatTemplateInputs& inputs);

// The special-token variables tokenizer.special_tokens_map gives templates: bos_token, eos_token, unk_token,
// sep_token, pad_token, cls_token, mask_token, and other "*_token" strings and "extra_special_tokens" of a
// dict, from tokenizer_config.json (plain strings or AddedToken dicts with "content"; null ones left out).
json::Object chat_template_special_tokens(const json::Value& tokenizer_config);

// The Jinja environment of Transformers' _compile_jinja_template.
const jinja::Environment& transformers_jinja_environment();

// Parses a template with Transformers' options (trim_blocks, lstrip_blocks); render it with the environment
// above.
jinja::Template compile_chat_template(const std::string& source);

// Renders one template source as render_jinja_template does, with messages, tools, documents,
// add_generation_prompt, the special tokens and the extra variables (which override special tokens).
std::string render_chat_template(const std::string& source, const json::Value& tokenizer_config,
                                 const ChatTemplateInputs& inputs);

// tokenizer.apply_chat_template(messages, tokenize=False, ...): selects the template and renders it.
std::string apply_chat_template(const ChatTemplates& templates, const json::Value& tokenizer_config,
                                const ChatTemplateInputs& inputs);

}  // namespace tfm

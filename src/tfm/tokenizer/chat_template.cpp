#include "tfm/tokenizer/chat_template.h"

#include <ctime>
#include <filesystem>

#include "tfm/core/error.h"
#include "tfm/io/file.h"
#include "tfm/jinja/strings.h"
#include "tfm/jinja/template.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;

// A config value that may be a plain string or an AddedToken dict; empty when neither.
std::optional<std::string> token_string(const json::Value& v) {
  if (v.is_string()) return v.as_string();
  if (v.is_object())
    if (const json::Value* c = v.find("content"); c && c->is_string()) return c->as_string();
  return std::nullopt;
}

std::string strftime_now(const std::string& format) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string out(256 + format.size() * 8, '\0');
  const size_t n = std::strftime(out.data(), out.size(), format.c_str(), &local);
  out.resize(n);
  return out;
}

// Transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
jinja::Value tojson(jinja::Context&, const jinja::Value& v, jinja::Args& a) {
  jinja::JsonOptions o;
  o.ensure_ascii = a.get(0, "ensure_ascii", false).truthy();
  o.indent = a.get(1, "indent", nullptr);
  const jinja::Value separators = a.get(2, "separators", nullptr);
  if (!separators.is_none()) {
    check(separators.is_list() && separators.items().size() == 2 && separators.items()[0].is_string() &&
              separators.items()[1].is_string(),
          "tojson: separators must be a pair of strings");
    o.item_separator = separators.items()[0].as_string();
    o.key_separator = separators.items()[1].as_string();
  }
  o.sort_keys = a.get(3, "sort_keys", false).truthy();
  return jinja::dump_json(v, o);
}

// Transformers marks the end of the message to continue with this tag and cuts the rendering there.
constexpr std::string_view kContinueTag = "CONTINUE_FINAL_MESSAGE_TAG ";

std::string python_strip(const std::string& s) {
  return jinja::pystr::strip(s, nullptr, true, true);
}

// Appends the tag to the last message's field (or its last part with text); returns the text continued.
std::string mark_final_message(json::Value& messages, const std::string& field, const std::string& source) {
  json::Value& last = messages.as_array().back();
  json::Value* value = last.find(field);
  check(value && !value->is_null(), "continue_final_message is set but the final message has no \"", field,
        "\" to continue");
  check(source.find(field) != std::string::npos, "continue_final_message is set to \"", field,
        "\" but this is not an accepted field in the chat template");
  if (value->is_array()) {
    auto& parts = value->as_array();
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
      json::Value* text = it->find("text");
      if (!text) continue;
      std::string original = text->as_string();
      *text = original + std::string(kContinueTag);
      return original;
    }
    throw_error(
        "continue_final_message is set but we could not find any text to continue in the final message");
  }
  check(value->is_string(), "continue_final_message: the final message's \"", field, "\" must be text");
  std::string original = value->as_string();
  *value = original + std::string(kContinueTag);
  return original;
}

std::string cut_at_final_message(const std::string& rendered, const std::string& final_text) {
  const std::string tag = python_strip(std::string(kContinueTag));
  check(
      rendered.find(python_strip(final_text)) != std::string::npos && rendered.find(tag) != std::string::npos,
      "continue_final_message is set but the final message does not appear in the chat after applying the "
      "chat template (the template may change or drop part of it)");
  const size_t at = rendered.rfind(tag);
  if (rendered.compare(at, kContinueTag.size(), kContinueTag) == 0) return rendered.substr(0, at);
  return jinja::pystr::strip(rendered.substr(0, at), nullptr, false, true);
}

jinja::Environment make_environment() {
  jinja::Environment env = jinja::Environment::jinja2_defaults();
  env.filters["tojson"] = tojson;
  env.globals["raise_exception"] =
      jinja::Value::callable("raise_exception", [](jinja::Context&, jinja::Args& a) -> jinja::Value {
        throw_error(a.get(0, "message", jinja::Value()).str());
      });
  env.globals["strftime_now"] = jinja::Value::callable("strftime_now", [](jinja::Context&, jinja::Args& a) {
    const jinja::Value format = a.get(0, "format", jinja::Value());
    check(format.is_string(), "strftime_now: the format must be a string");
    return jinja::Value(strftime_now(format.as_string()));
  });
  return env;
}

}  // namespace

ChatTemplates load_chat_templates(const std::string& model_dir, const json::Value& tokenizer_config) {
  const fs::path dir(model_dir);
  ChatTemplates t;
  // Files beside the config take priority over it, as in PreTrainedTokenizerBase._from_pretrained.
  std::vector<std::pair<std::string, std::string>> files;
  if (fs::is_regular_file(dir / "chat_template.jinja"))
    files.emplace_back("default", io::read_file((dir / "chat_template.jinja").string()));
  const fs::path extra = dir / "additional_chat_templates";
  if (fs::is_directory(extra)) {
    std::vector<fs::path> paths;
    for (const auto& e : fs::directory_iterator(extra))
      if (e.is_regular_file() && e.path().extension() == ".jinja") paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) files.emplace_back(p.stem().string(), io::read_file(p.string()));
  }
  if (files.size() == 1 && files[0].first == "default") {
    t.single = std::move(files[0].second);
    return t;
  }
  if (!files.empty()) {
    t.named = std::move(files);
    return t;
  }
  if (const json::Value* c = tokenizer_config.find("chat_template"); c && !c->is_null()) {
    if (c->is_string()) {
      t.single = c->as_string();
    } else if (c->is_array()) {
      for (const auto& entry : c->as_array()) {
        check(entry.is_object() && entry.contains("name") && entry.contains("template"),
              "tokenizer_config.json: chat_template entries must be {\"name\", \"template\"} objects");
        t.named.emplace_back(entry.at("name").as_string(), entry.at("template").as_string());
      }
    } else {
      throw_error("tokenizer_config.json: chat_template must be a string or a list of named templates");
    }
    return t;
  }
  if (fs::is_regular_file(dir / "chat_template.json")) {
    const json::Value j = json::parse_file((dir / "chat_template.json").string());
    const json::Value* c = j.find("chat_template");
    check(c && c->is_string(), (dir / "chat_template.json").string(),
          ": expected a \"chat_template\" string");
    t.single = c->as_string();
  }
  return t;
}

json::Value read_tokenizer_config(const std::string& model_dir) {
  const fs::path dir(model_dir);
  json::Value config = json::Object{};
  if (fs::is_regular_file(dir / "tokenizer_config.json")) {
    config = json::parse_file((dir / "tokenizer_config.json").string());
    check(config.is_object(), (dir / "tokenizer_config.json").string(), ": expected a JSON object");
  }
  if (!config.contains("added_tokens_decoder") && fs::is_regular_file(dir / "special_tokens_map.json")) {
    const json::Value map = json::parse_file((dir / "special_tokens_map.json").string());
    check(map.is_object(), (dir / "special_tokens_map.json").string(), ": expected a JSON object");
    for (const auto& [key, value] : map.as_object()) config.set(key, value);
  }
  return config;
}

std::string select_chat_template(const ChatTemplates& templates, const ChatTemplateInputs& inputs) {
  if (!templates.named.empty()) {
    auto find = [&](std::string_view name) -> const std::string* {
      for (const auto& [n, s] : templates.named)
        if (n == name) return &s;
      return nullptr;
    };
    if (inputs.chat_template) {
      const std::string* s = find(*inputs.chat_template);
      return s ? *s : *inputs.chat_template;
    }
    if (inputs.tools)
      if (const std::string* s = find("tool_use")) return *s;
    if (const std::string* s = find("default")) return *s;
    std::string names;
    for (const auto& [n, s] : templates.named) names += (names.empty() ? "" : ", ") + n;
    throw_error("this model has multiple chat templates with no default specified; choose one of: ", names);
  }
  if (inputs.chat_template) return *inputs.chat_template;
  check(templates.single.has_value(),
        "cannot use a chat template: the tokenizer has none (no chat_template in tokenizer_config.json, "
        "no chat_template.jinja)");
  return *templates.single;
}

json::Object chat_template_special_tokens(const json::Value& config) {
  static const char* const kNamed[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                       "pad_token", "cls_token", "mask_token"};
  json::Object out;
  if (!config.is_object()) return out;
  for (const char* name : kNamed)
    if (const json::Value* v = config.find(name))
      if (auto s = token_string(*v)) out.emplace_back(name, *s);
  // Model-specific tokens: other "*_token" keys holding a token, and a dict of extra_special_tokens.
  for (const auto& [key, v] : config.as_object()) {
    const bool named = std::find(std::begin(kNamed), std::end(kNamed), key) != std::end(kNamed);
    if (named || key.size() <= 6 || !key.ends_with("_token")) continue;
    if (auto s = token_string(v)) out.emplace_back(key, *s);
  }
  const json::Value* extra = config.find("extra_special_tokens");
  if (!extra) extra = config.find("additional_special_tokens");
  if (extra && extra->is_object())
    for (const auto& [key, v] : extra->as_object())
      if (auto s = token_string(v)) out.emplace_back(key, *s);
  return out;
}

const jinja::Environment& transformers_jinja_environment() {
  static const jinja::Environment env = make_environment();
  return env;
}

jinja::Template compile_chat_template(const std::string& source) {
  jinja::LexerOptions options;
  options.trim_blocks = true;
  options.lstrip_blocks = true;
  return jinja::Template(source, options);
}

std::string render_chat_template(const std::string& source, const json::Value& tokenizer_config,
                                 const ChatTemplateInputs& inputs) {
  check(inputs.messages.is_array(), "messages must be a list of message objects");
  check(inputs.messages.size() > 0,
        "cannot apply a chat template to an empty conversation; provide at least one message");
  if (inputs.tools) {
    check(inputs.tools->is_array(), "tools must be a list of JSON schemas");
    for (const auto& tool : inputs.tools->as_array())
      check(tool.is_object(), "tools should be JSON schemas (objects)");
  }
  if (inputs.documents) {
    check(inputs.documents->is_array(), "documents must be a list of dicts");
    for (const auto& doc : inputs.documents->as_array())
      check(doc.is_object(), "documents should be a list of dicts with 'title' and 'text' keys");
  }
  for (const auto& [k, v] : inputs.variables)
    check(k != "messages" && k != "tools" && k != "documents" && k != "add_generation_prompt",
          "apply_chat_template got multiple values for '", k, "'");
  json::Value messages = inputs.messages;
  std::string final_text;
  if (inputs.continue_final_message) {
    check(
        !inputs.add_generation_prompt,
        "continue_final_message and add_generation_prompt are not compatible: use continue_final_message to "
        "continue the final message, add_generation_prompt to start a new assistant message");
    final_text = mark_final_message(messages, *inputs.continue_final_message, source);
  }
  jinja::Variables vars;
  vars.emplace_back("messages", jinja::Value::from_json(messages));
  vars.emplace_back("tools", inputs.tools ? jinja::Value::from_json(*inputs.tools) : jinja::Value(nullptr));
  vars.emplace_back("documents",
                    inputs.documents ? jinja::Value::from_json(*inputs.documents) : jinja::Value(nullptr));
  vars.emplace_back("add_generation_prompt", inputs.add_generation_prompt);
  for (const auto& [k, v] : chat_template_special_tokens(tokenizer_config))
    vars.emplace_back(k, jinja::Value::from_json(v));
  for (const auto& [k, v] : inputs.variables) vars.emplace_back(k, jinja::Value::from_json(v));  // later wins

  std::string rendered;
  try {
    rendered = compile_chat_template(source).render(vars, transformers_jinja_environment());
  } catch (const Error& e) {
    throw_error("chat template: ", e.what());
  }
  return inputs.continue_final_message ? cut_at_final_message(rendered, final_text) : rendered;
}

std::string apply_chat_template(const ChatTemplates& templates, const json::Value& tokenizer_config,
                                const ChatTemplateInputs& inputs) {
  return render_chat_template(select_chat_template(templates, inputs), tokenizer_config, inputs);
}

}  // namespace tfm

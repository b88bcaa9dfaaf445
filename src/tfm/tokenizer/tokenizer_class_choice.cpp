#include "tfm/tokenizer/tokenizer_class_choice.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

struct ClassName {
  std::string_view name;
  std::string_view resolves_to;
  ClassKind kind;
};

#include "tfm/tokenizer/transformers_class_table.inc"

const ChosenClass kTokenizersBackend{"TokenizersBackend", ClassKind::file};

// tokenizer_class_from_name: nullopt for a name Transformers does not know.
std::optional<ChosenClass> class_from_name(std::string_view name) {
  for (const ClassName& c : kClassNames)
    if (c.name == name) return ChosenClass{std::string(c.resolves_to), c.kind};
  return std::nullopt;
}

std::string_view without_fast(std::string_view name) {
  if (name.ends_with("Fast")) name.remove_suffix(4);
  return name;
}

std::string_view registered_class(std::string_view model_type) {
  for (const auto& [type, cls] : kRegisteredClasses)
    if (type == model_type) return cls;
  return {};
}

bool has_incorrect_hub_class(std::string_view model_type) {
  return std::find(std::begin(kIncorrectHubClass), std::end(kIncorrectHubClass), model_type) !=
         std::end(kIncorrectHubClass);
}

// fnmatch with '*' only, the one wildcard the patterns use.
bool glob_match(std::string_view text, std::string_view pattern) {
  const size_t star = pattern.find('*');
  if (star == std::string_view::npos) return text == pattern;
  if (!text.starts_with(pattern.substr(0, star))) return false;
  text.remove_prefix(star);
  pattern.remove_prefix(star + 1);
  for (size_t skip = 0; skip <= text.size(); ++skip)
    if (glob_match(text.substr(skip), pattern)) return true;
  return false;
}

// The class the tokenizer_class entry names (with "Fast" stripped, else added), as AutoTokenizer resolves it;
// TokenizersBackend for an unknown name or the Python base class.
ChosenClass class_of_config_entry(std::string_view name) {
  std::optional<ChosenClass> c = class_from_name(without_fast(name));
  if (!c && !name.ends_with("Fast")) c = class_from_name(std::string(name) + "Fast");
  if (!c || c->name == "PythonBackend") return kTokenizersBackend;
  return *c;
}

bool is_backend_name(std::string_view name) {
  return name == "TokenizersBackend" || name == "PythonBackend" || name == "PreTrainedTokenizerFast";
}

}  // namespace

ChosenClass choose_tokenizer_class(const json::Value& model_config, const json::Value& tokenizer_config,
                                   std::string_view name_or_path) {
  const std::string model_type = model_config.is_object() ? string_or(model_config, "model_type", "") : "";
  const std::string config_class = string_or(tokenizer_config, "tokenizer_class", "");
  const std::string model_config_class =
      model_config.is_object() ? string_or(model_config, "tokenizer_class", "") : "";
  bool auto_map = false;  // the Hub names custom code for AutoTokenizer
  if (const json::Value* map = tokenizer_config.find("auto_map")) {
    const json::Value* entry = map->is_object() ? map->find("AutoTokenizer") : map;
    auto_map = entry && !entry->is_null();
  }

  const std::string lower_name = to_lowercase(name_or_path);  // Python's str.lower()
  for (std::string_view pattern : kTokenizersBackendIds)
    if (!auto_map && glob_match(lower_name, pattern)) return kTokenizersBackend;

  // A Hub class that differs from the class registered for the model type.
  const std::string hub_class = !config_class.empty() ? config_class : model_config_class;
  const std::string_view registered = registered_class(model_type);
  if (!auto_map && !hub_class.empty() && !registered.empty() &&
      without_fast(registered) != without_fast(hub_class)) {
    const std::string_view registered_name = without_fast(registered);
    if (!is_backend_name(registered_name) && registered_name != "MistralCommonBackend") {
      const std::string_view name = has_incorrect_hub_class(model_type) ? registered_name : hub_class;
      if (std::optional<ChosenClass> c = class_from_name(name); c && !is_backend_name(c->name)) return *c;
    }
    return kTokenizersBackend;
  }

  if (auto_map && !has_incorrect_hub_class(model_type)) {  // Transformers ignores the Hub's code there
    const bool local_class =
        !registered.empty() || (!config_class.empty() && class_from_name(without_fast(config_class)));
    check(local_class,
          "the tokenizer is custom Python code (tokenizer_config.json's auto_map), which tfm cannot run");
  }
  if (!config_class.empty()) return class_of_config_entry(config_class);
  if (!model_config_class.empty()) {
    const std::string_view name = model_config_class.find("PreTrainedTokenizerFast") == std::string::npos
                                      ? without_fast(model_config_class)
                                      : std::string_view(model_config_class);
    return class_from_name(name).value_or(kTokenizersBackend);
  }
  if (!registered.empty()) return class_from_name(registered).value_or(kTokenizersBackend);
  return kTokenizersBackend;
}

}  // namespace tfm::tokenizer

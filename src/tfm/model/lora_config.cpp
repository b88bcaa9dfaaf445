#include "tfm/model/lora_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "tfm/core/error.h"
#include "tfm/io/regex.h"

namespace tfm {
namespace {

using ModuleSpec = std::variant<std::monostate, std::vector<std::string>, std::string>;

// The PEFT release whose adapter_config.json fields to_json writes.
constexpr const char* kPeftVersion = "0.21.2";

// PEFT's re.fullmatch, by PCRE2: a pattern from a downloaded adapter that backtracks without bound is an error.
bool full_match(const std::string& pattern, const std::string& text, const char* field) {
  try {
    return Regex(pattern).full_match(text);
  } catch (const Error& e) {
    throw_error("LoRA ", field, ": ", e.what());
  }
}

// PEFT's check_target_module_exists for one list or regex.
bool matches(const ModuleSpec& spec, const std::string& module, const char* field) {
  if (const auto* names = std::get_if<std::vector<std::string>>(&spec)) {
    for (const std::string& n : *names)
      if (module == n || module.ends_with("." + n)) return true;
    return false;
  }
  if (const auto* pattern = std::get_if<std::string>(&spec)) return full_match(*pattern, module, field);
  return false;
}

ModuleSpec read_modules(const json::Value* v, const char* field) {
  if (!v || v->is_null()) return {};
  if (v->is_string()) return v->as_string();
  check(v->is_array(), "adapter_config.json: ", field, " must be a list of module names or one string");
  std::vector<std::string> names;
  for (const json::Value& n : v->as_array()) names.push_back(n.as_string());
  return names;
}

json::Value write_modules(const ModuleSpec& spec) {
  if (const auto* pattern = std::get_if<std::string>(&spec)) return *pattern;
  const auto* names = std::get_if<std::vector<std::string>>(&spec);
  if (!names) return nullptr;
  std::vector<std::string> sorted = *names;  // PEFT keeps a set, whose order is arbitrary
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  return json::Array(sorted.begin(), sorted.end());
}

// A value PEFT's default leaves the adapters' meaning alone with: null, false, "", [] or {}.
bool is_unset(const json::Value& v) {
  if (v.is_null()) return true;
  if (v.is_bool()) return !v.as_bool();
  if (v.is_string() || v.is_array() || v.is_object()) return v.size() == 0;
  return false;
}

// The first pattern key whose "(.*\.)?(key)" matches the whole module name (PEFT's get_pattern_key).
template <typename T>
const T* pattern_value(const std::vector<std::pair<std::string, T>>& pattern, const std::string& module,
                       const char* field) {
  for (const auto& [key, value] : pattern)
    if (full_match("(.*\\.)?(" + key + ")", module, field)) return &value;
  return nullptr;
}

}  // namespace

LoraConfig LoraConfig::from_json(const json::Value& j, const std::string& source) {
  check(j.is_object(), source, ": not a JSON object");
  LoraConfig c;
  if (const json::Value* t = j.find("peft_type"); t && !t->is_null())
    check(t->is_string() && t->as_string() == "LORA", source, ": peft_type ", json::dump_compact(*t),
          " is not LORA (tfm runs LoRA adapters)");
  // Fields that would change what the adapters compute, which tfm does not implement.
  for (const char* field : {"use_dora", "fan_in_fan_out", "modules_to_save", "layers_to_transform",
                            "layers_pattern", "target_parameters", "layer_replication", "lora_bias",
                            "use_qalora", "trainable_token_indices", "alora_invocation_tokens", "use_bdlora",
                            "arrow_config", "kasa_config", "velora_config", "monteclora_config"}) {
    const json::Value* v = j.find(field);
    check(!v || is_unset(*v), source, ": ", field, " = ", v ? json::dump_compact(*v) : "",
          " is not supported by tfm");
  }
  if (const json::Value* v = j.find("bias"); v && !v->is_null())
    check(v->is_string() && v->as_string() == "none", source, ": bias ", json::dump_compact(*v),
          " is not supported (only \"none\")");
  try {
    if (const json::Value* v = j.find("r")) c.r = v->as_int();
    if (const json::Value* v = j.find("lora_alpha")) c.lora_alpha = v->as_double();
    if (const json::Value* v = j.find("lora_dropout")) c.lora_dropout = v->as_double();
    if (const json::Value* v = j.find("use_rslora")) c.use_rslora = v->as_bool();
    if (const json::Value* v = j.find("inference_mode")) c.inference_mode = v->as_bool();
    if (const json::Value* v = j.find("base_model_name_or_path"); v && !v->is_null())
      c.base_model_name_or_path = v->as_string();
    if (const json::Value* v = j.find("task_type")) c.task_type = v->is_null() ? "" : v->as_string();
    c.target_modules = read_modules(j.find("target_modules"), "target_modules");
    c.exclude_modules = read_modules(j.find("exclude_modules"), "exclude_modules");
    if (const json::Value* v = j.find("rank_pattern"); v && !v->is_null())
      for (const auto& [key, rank] : v->as_object()) c.rank_pattern.emplace_back(key, rank.as_int());
    if (const json::Value* v = j.find("alpha_pattern"); v && !v->is_null())
      for (const auto& [key, alpha] : v->as_object()) c.alpha_pattern.emplace_back(key, alpha.as_double());
  } catch (const Error& e) {
    throw_error(source, ": ", e.what());
  }
  check(c.r > 0, source, ": r = ", c.r, " must be positive");
  for (const auto& [key, rank] : c.rank_pattern)
    check(rank > 0, source, ": rank_pattern[\"", key, "\"] = ", rank, " must be positive");
  check(c.lora_dropout >= 0 && c.lora_dropout < 1, source, ": lora_dropout ", c.lora_dropout,
        " is not in [0, 1)");
  return c;
}

LoraConfig LoraConfig::from_file(const std::string& path) {
  check(std::filesystem::exists(path), path, " does not exist");
  return from_json(json::parse_file(path), path);
}

json::Value LoraConfig::to_json() const {
  json::Object patterns_r, patterns_alpha;
  for (const auto& [key, rank] : rank_pattern) patterns_r.emplace_back(key, rank);
  for (const auto& [key, alpha] : alpha_pattern) patterns_alpha.emplace_back(key, alpha);
  const bool whole_alpha = lora_alpha == std::floor(lora_alpha) && std::fabs(lora_alpha) < 1e15;
  json::Object o{
      {"alora_invocation_tokens", nullptr},
      {"alpha_pattern", std::move(patterns_alpha)},
      {"arrow_config", nullptr},
      {"auto_mapping", nullptr},
      {"base_model_name_or_path",
       base_model_name_or_path.empty() ? json::Value() : json::Value(base_model_name_or_path)},
      {"bias", "none"},
      {"corda_config", nullptr},
      {"ensure_weight_tying", false},
      {"eva_config", nullptr},
      {"exclude_modules", write_modules(exclude_modules)},
      {"fan_in_fan_out", false},
      {"inference_mode", inference_mode},
      {"init_lora_weights", true},
      {"kasa_config", nullptr},
      {"layer_replication", nullptr},
      {"layers_pattern", nullptr},
      {"layers_to_transform", nullptr},
      {"loftq_config", json::Object{}},
      // An int in PEFT's dataclass: a whole alpha is written as one.
      {"lora_alpha", whole_alpha ? json::Value(static_cast<int64_t>(lora_alpha)) : json::Value(lora_alpha)},
      {"lora_bias", false},
      {"lora_dropout", lora_dropout},
      {"lora_ga_config", nullptr},
      {"megatron_config", nullptr},
      {"megatron_core", "megatron.core"},
      {"modules_to_save", nullptr},
      {"monteclora_config", nullptr},
      {"peft_type", "LORA"},
      {"peft_version", kPeftVersion},
      {"qalora_group_size", 16},
      {"r", r},
      {"rank_pattern", std::move(patterns_r)},
      {"revision", nullptr},
      {"target_modules", write_modules(target_modules)},
      {"target_parameters", nullptr},
      {"task_type", task_type.empty() ? json::Value() : json::Value(task_type)},
      {"trainable_token_indices", nullptr},
      {"use_bdlora", nullptr},
      {"use_dora", false},
      {"use_qalora", false},
      {"use_rslora", use_rslora},
      {"velora_config", nullptr},
  };
  return o;
}

bool LoraConfig::targets(const std::string& module) const {
  if (matches(exclude_modules, module, "exclude_modules")) return false;
  if (std::holds_alternative<std::monostate>(target_modules))
    return matches(std::vector<std::string>{"q_proj", "v_proj"}, module, "target_modules");
  // Every Linear tfm adapts is one of the decoder's; the output head is not among them.
  if (const auto* s = std::get_if<std::string>(&target_modules); s && *s == "all-linear") return true;
  return matches(target_modules, module, "target_modules");
}

int64_t LoraConfig::rank_of(const std::string& module) const {
  const int64_t* rank = pattern_value(rank_pattern, module, "rank_pattern");
  return rank ? *rank : r;
}

float LoraConfig::scaling_of(const std::string& module) const {
  const double* alpha = pattern_value(alpha_pattern, module, "alpha_pattern");
  const double a = alpha ? *alpha : lora_alpha, rank = static_cast<double>(rank_of(module));
  return static_cast<float>(use_rslora ? a / std::sqrt(rank) : a / rank);
}

}  // namespace tfm

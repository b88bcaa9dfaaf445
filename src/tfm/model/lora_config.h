// A LoRA adapter's adapter_config.json as PEFT writes it (peft/tuners/lora/config.py): the fields that say
// which modules get adapters and how they scale. Apart from the tensors (lora.h), so that the parser builds
// without the model's kernels.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tfm/io/json.h"

namespace tfm {

// The LoraConfig fields tfm follows, with PEFT's defaults; adapter_config.json fields that would change the
// adapters' meaning and that tfm does not implement (use_dora, fan_in_fan_out, bias other than "none",
// modules_to_save, layers_to_transform, ...) are an error naming the field.
struct LoraConfig {
  int64_t r = 8;
  double lora_alpha = 8;
  double lora_dropout = 0;
  // A list of module names (a module matches one it equals or ends with "." + it), one string (a regex that
  // must match a whole module name, or "all-linear": every linear layer but the output head), or unset: the
  // architecture's default, q_proj and v_proj for every architecture tfm runs.
  std::variant<std::monostate, std::vector<std::string>, std::string> target_modules;
  std::variant<std::monostate, std::vector<std::string>, std::string> exclude_modules;  // matched alike
  bool use_rslora = false;  // scaling lora_alpha / sqrt(r) instead of lora_alpha / r
  // Per-module rank and alpha: the first key k for which a module's name matches the regex "(.*\.)?(k)$".
  std::vector<std::pair<std::string, int64_t>> rank_pattern;
  std::vector<std::pair<std::string, double>> alpha_pattern;
  std::string base_model_name_or_path;
  std::string task_type = "CAUSAL_LM";
  bool inference_mode = false;

  // adapter_config.json's contents; `source` names it in errors.
  static LoraConfig from_json(const json::Value& config, const std::string& source = "adapter_config.json");
  static LoraConfig from_file(const std::string& path);
  // Every field PEFT's save_pretrained writes, with its defaults where tfm has no counterpart.
  json::Value to_json() const;

  // Whether the module (a checkpoint name: "model.layers.0.self_attn.q_proj") gets an adapter.
  bool targets(const std::string& module) const;
  int64_t rank_of(const std::string& module) const;
  float scaling_of(const std::string& module) const;
};

}  // namespace tfm

#include "tfm/model/lora.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/core/floats.h"
#include "tfm/io/safetensors.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;
using ModuleSpec = std::variant<std::monostate, std::vector<std::string>, std::string>;

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";
// The PEFT release whose adapter_config.json fields to_json writes.
constexpr const char* kPeftVersion = "0.21.2";

bool full_match(const std::string& pattern, const std::string& text, const char* field) {
  try {
    return std::regex_match(text, std::regex(pattern));
  } catch (const std::regex_error& e) {
    throw_error("LoRA ", field, ": \"", pattern, "\" is not a regular expression tfm can read (", e.what(),
                ")");
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

// A host tensor of any float dtype as `dtype` on `device`.
Tensor placed_as(const Tensor& host, DType dtype, Device device) {
  Tensor converted = Tensor::cpu(host.shape(), dtype);
  ops::cast(host, converted);
  return to_device(converted, device);
}

// A device tensor's values as float32 on the host (a copy).
Tensor host_floats(const Tensor& t) {
  Tensor out = Tensor::cpu(t.shape(), DType::float32);
  ops::cast(to_device(t, Device{}), out);
  return out;
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  zero(t);
  return t;
}

// The adapters `config` asks for, by Linear, without their tensors.
struct PlannedLinear {
  Linear* linear;
  std::vector<LoraAdapter> adapters;
};

std::vector<PlannedLinear> plan(CausalLM& model, const LoraConfig& config) {
  std::vector<PlannedLinear> out;
  for (const LinearModule& m : model.linear_modules()) {
    check(dynamic_cast<const LoraWeight*>(&m.linear->weight()) == nullptr, m.linear->name(),
          " already has LoRA adapters (merge them first)");
    PlannedLinear p{m.linear, {}};
    int64_t row = 0;
    for (const auto& [module, rows] : m.modules) {
      if (config.targets(module))
        p.adapters.push_back({module, row, rows, {}, {}, config.scaling_of(module)});
      row += rows;
    }
    if (!p.adapters.empty()) out.push_back(std::move(p));
  }
  check(!out.empty(), "LoRA: target_modules ", json::dump(write_modules(config.target_modules)),
        " matches no linear module of the model");
  return out;
}

void install(CausalLM& model, std::vector<PlannedLinear> planned, const LoraConfig& config, uint64_t seed) {
  for (size_t i = 0; i < planned.size(); ++i) {
    Linear& linear = *planned[i].linear;
    auto weight = std::make_unique<LoraWeight>(linear.replace_weight(nullptr), std::move(planned[i].adapters),
                                               static_cast<float>(config.lora_dropout), seed + i);
    weight->train(model.training());
    linear.replace_weight(std::move(weight));
  }
}

// Each LoraWeight of the model with its Linear.
std::vector<std::pair<Linear*, const LoraWeight*>> lora_weights(CausalLM& model) {
  std::vector<std::pair<Linear*, const LoraWeight*>> out;
  for (const LinearModule& m : model.linear_modules())
    if (const auto* w = dynamic_cast<const LoraWeight*>(&m.linear->weight())) out.emplace_back(m.linear, w);
  return out;
}

// PEFT inserts the adapter's name in memory ("lora_A.default.weight"); saved files have none.
std::string without_adapter_name(const std::string& key) {
  static const std::regex in_memory(R"((\.lora_[AB])\.default(\.weight)$)");
  return std::regex_replace(key, in_memory, "$1$2");
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  check(out.good(), "cannot write ", path);
}

}  // namespace

LoraConfig LoraConfig::from_json(const json::Value& j, const std::string& source) {
  check(j.is_object(), source, ": not a JSON object");
  LoraConfig c;
  if (const json::Value* t = j.find("peft_type"); t && !t->is_null())
    check(t->as_string() == "LORA", source, ": peft_type ", t->as_string(),
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
    check(v->as_string() == "none", source, ": bias \"", v->as_string(),
          "\" is not supported (only \"none\")");
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
  check(fs::exists(path), path, " does not exist");
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

std::string lora_key(const std::string& module, char which) {
  return "base_model.model." + module + ".lora_" + which + ".weight";
}

LoraWeight::LoraWeight(std::unique_ptr<LinearWeight> base, std::vector<LoraAdapter> adapters, float dropout,
                       uint64_t seed)
    : base_(std::move(base)), adapters_(std::move(adapters)), dropout_(dropout), seed_(seed) {
  for (const LoraAdapter& a : adapters_) {
    check(a.a.dim() == 2 && a.a.size(1) == base_->in_features() && a.b.dim() == 2 && a.b.size(0) == a.rows &&
              a.b.size(1) == a.a.size(0) && a.row + a.rows <= base_->out_features(),
          "LoRA adapter of ", a.module, ": A ", a.a.str(), " and B ", a.b.str(), " do not fit rows [", a.row,
          ", ", a.row + a.rows, ") of a ", base_->out_features(), "x", base_->in_features(), " weight");
  }
}

uint64_t LoraWeight::mask_seed(size_t adapter) const {
  return seed_ * 0x9E3779B97F4A7C15ull + training_forwards_ * 0xD1B54A32D192ED03ull + adapter;
}

Tensor LoraWeight::branch_input(const Tensor& x, size_t adapter) const {
  if (!dropping()) return x;
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  ops::dropout(x, dropout_, mask_seed(adapter), out);
  return out;
}

void LoraWeight::forward(const Tensor& x, const Tensor& bias, Tensor& y, std::string_view variant) const {
  base_->forward(x, bias, y, variant);
  if (dropping()) ++training_forwards_;
  const int64_t T = x.size(0);
  for (size_t i = 0; i < adapters_.size(); ++i) {
    const LoraAdapter& a = adapters_[i];
    Tensor h = empty({T, a.a.size(0)}, x.dtype(), x.device()), z = empty({T, a.rows}, x.dtype(), x.device());
    ops::linear(branch_input(x, i), a.a, Tensor(), h, variant);
    ops::linear(h, a.b, Tensor(), z, variant);
    ops::add_scaled_columns_(y, a.row, z, 0, a.rows, a.scaling);
  }
}

void LoraWeight::backward(const Tensor& x, const Tensor& dy, Tensor& dx, Tensor& dbias,
                          const Gradients& grads, const std::string& name) const {
  base_->backward(x, dy, dx, dbias, grads, name);
  const int64_t T = x.size(0);
  for (size_t i = 0; i < adapters_.size(); ++i) {
    const LoraAdapter& a = adapters_[i];
    Tensor da = grads.of(lora_key(a.module, 'A')), db = grads.of(lora_key(a.module, 'B')), no_bias;
    if (!da.defined() && !db.defined() && !dx.defined()) continue;
    const Tensor input = branch_input(x, i);
    Tensor h = empty({T, a.a.size(0)}, x.dtype(), x.device());  // A's output again: the forward keeps only x
    ops::linear(input, a.a, Tensor(), h);
    // The gradient of B's output: the scaled block of dy (torch's grad of `lora_B(...) * scaling`).
    Tensor dz = zeros({T, a.rows}, x.dtype(), x.device());
    ops::add_scaled_columns_(dz, 0, dy, a.row, a.rows, a.scaling);
    Tensor dh = empty(h.shape(), x.dtype(), x.device());
    ops::linear_backward(h, a.b, dz, dh, db, no_bias);
    Tensor dinput = dx.defined() ? empty(x.shape(), x.dtype(), x.device()) : Tensor();
    ops::linear_backward(input, a.a, dh, dinput, da, no_bias);
    if (!dx.defined()) continue;
    if (dropping()) ops::dropout(dinput, dropout_, mask_seed(i), dinput);  // the mask is its own backward
    ops::add_(dx, dinput);
  }
}

size_t LoraWeight::nbytes() const {
  size_t bytes = base_->nbytes();
  for (const LoraAdapter& a : adapters_) bytes += a.a.nbytes() + a.b.nbytes();
  return bytes;
}

std::vector<std::pair<std::string, Tensor>> attach_lora(CausalLM& model, const LoraConfig& config,
                                                        uint64_t seed) {
  std::vector<PlannedLinear> planned = plan(model, config);
  std::mt19937_64 rng(seed);
  for (PlannedLinear& p : planned) {
    const int64_t in = p.linear->weight().in_features();
    // kaiming_uniform_(a=sqrt(5)) bounds A by gain * sqrt(3 / in) with gain sqrt(2 / (1 + 5)): 1 / sqrt(in).
    // The uniform is drawn from the top 24 bits, so that the values do not depend on the standard library.
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    for (LoraAdapter& a : p.adapters) {
      const int64_t r = config.rank_of(a.module);
      Tensor host = Tensor::cpu({r, in}, DType::float32);
      for (int64_t i = 0; i < host.numel(); ++i) {
        const double u = static_cast<double>(rng() >> 40) * 0x1p-24;
        host.data<float>()[i] = static_cast<float>((2 * u - 1) * bound);
      }
      a.a = placed_as(host, model.dtype(), model.device());
      a.b = zeros({a.rows, r}, model.dtype(), model.device());
    }
  }
  install(model, std::move(planned), config, seed);
  return lora_tensors(model);
}

LoraConfig load_adapter(CausalLM& model, const std::string& dir) {
  check(fs::is_directory(dir), "adapter folder ", dir, " does not exist");
  const std::string weights = (fs::path(dir) / kWeightsFile).string();
  check(fs::exists(weights), dir, " has no ", kWeightsFile,
        fs::exists(fs::path(dir) / "adapter_model.bin")
            ? " (tfm reads safetensors only, not adapter_model.bin)"
            : "");
  const LoraConfig config = LoraConfig::from_file((fs::path(dir) / kConfigFile).string());
  const SafetensorsFile file = SafetensorsFile::open(weights);
  std::map<std::string, std::string> unused;  // saved key -> the key in the file
  for (const TensorInfo& t : file.tensors()) unused.emplace(without_adapter_name(t.name), t.name);

  std::vector<PlannedLinear> planned = plan(model, config);
  for (PlannedLinear& p : planned) {
    const int64_t in = p.linear->weight().in_features();
    for (LoraAdapter& a : p.adapters) {
      const int64_t r = config.rank_of(a.module);
      auto take = [&](char which, const Shape& shape) {
        const std::string key = lora_key(a.module, which);
        const auto it = unused.find(key);
        check(it != unused.end(), weights, " has no ", key, " (adapter_config.json targets ", a.module, ")");
        const TensorInfo& info = *file.find(it->second);
        check(info.shape == shape, weights, ": ", it->second, " has shape ", shape_str(info.shape),
              ", the model's ", a.module, " needs ", shape_str(shape), " (an adapter for another model?)");
        check(is_floating(info.dtype), weights, ": ", it->second, " is ", dtype_name(info.dtype),
              ", not a float");
        Tensor t = placed_as(file.get(it->second), model.dtype(), model.device());
        unused.erase(it);
        return t;
      };
      a.a = take('A', {r, in});
      a.b = take('B', {a.rows, r});
    }
  }
  if (!unused.empty())
    throw_error(
        weights, " has ", unused.begin()->second,
        ", which no module adapter_config.json targets in this model has (an adapter for another model?)");
  install(model, std::move(planned), config, 0);
  return config;
}

std::vector<std::pair<std::string, Tensor>> lora_tensors(CausalLM& model) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [linear, weight] : lora_weights(model)) {
    for (const LoraAdapter& a : weight->adapters()) {
      out.emplace_back(lora_key(a.module, 'A'), a.a);
      out.emplace_back(lora_key(a.module, 'B'), a.b);
    }
  }
  return out;
}

void save_adapter(CausalLM& model, const LoraConfig& config, const std::string& dir) {
  std::vector<std::pair<std::string, Tensor>> tensors = lora_tensors(model);
  check(!tensors.empty(), "save_adapter: the model has no LoRA adapters");
  for (auto& [name, t] : tensors) t = to_device(t, Device{});
  fs::create_directories(dir);
  save_safetensors((fs::path(dir) / kWeightsFile).string(), tensors, {{"format", "pt"}});
  LoraConfig saved = config;
  saved.inference_mode = true;  // as PEFT's save_pretrained writes it
  write_text((fs::path(dir) / kConfigFile).string(),
             json::dump(saved.to_json(),
                        {.indent = 2, .ensure_ascii = true, .sort_keys = true, .item_separator = ","}));
}

void merge_adapter(CausalLM& model) {
  for (const auto& [linear, weight] : lora_weights(model)) {
    const auto* dense = dynamic_cast<const DenseWeight*>(&weight->base());
    check(dense != nullptr, linear->name(), ": only adapters on dense weights can be merged");
    const Tensor& w = dense->tensor();
    Tensor merged = host_floats(w);
    const int64_t in = w.size(1);
    visit_float(w.dtype(), [&]<typename T>() {
      for (const LoraAdapter& a : weight->adapters()) {
        const Tensor A = host_floats(a.a), B = host_floats(a.b);
        const int64_t r = A.size(0);
        for (int64_t i = 0; i < a.rows; ++i) {
          float* row = merged.data<float>() + (a.row + i) * in;
          for (int64_t k = 0; k < in; ++k) {
            float delta = 0;
            for (int64_t j = 0; j < r; ++j) delta += B.data<float>()[i * r + j] * A.data<float>()[j * in + k];
            row[k] = round_to<T>(row[k] + round_to<T>(delta * a.scaling));
          }
        }
      }
    });
    linear->replace_weight(std::make_unique<DenseWeight>(placed_as(merged, w.dtype(), w.device())));
  }
}

}  // namespace tfm

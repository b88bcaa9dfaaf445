#include "tfm/model/config.h"

#include <array>
#include <cmath>

#include "tfm/core/error.h"
#include "tfm/core/logging.h"

namespace tfm {
namespace {

struct ArchitectureDefaults {
  std::string_view name;
  std::string_view model_type;
  Architecture architecture;
  int64_t vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads;
  int64_t num_key_value_heads;  // 0: as many as attention heads
  int64_t head_dim;             // 0: hidden_size / num_attention_heads
  int64_t max_position_embeddings;
  std::optional<int64_t> bos, eos;
};

// Transformers' defaults for fields a config.json leaves out (configuration_<model>.py).
constexpr std::array<ArchitectureDefaults, 4> kArchitectures = {{
    {"LlamaForCausalLM", "llama", Architecture::llama, 32000, 4096, 11008, 32, 32, 0, 0, 2048, 1, 2},
    {"MistralForCausalLM", "mistral", Architecture::mistral, 32000, 4096, 14336, 32, 32, 8, 0, 4096 * 32, 1,
     2},
    {"Qwen2ForCausalLM", "qwen2", Architecture::qwen2, 151936, 4096, 22016, 32, 32, 32, 0, 32768, {}, {}},
    {"Qwen3ForCausalLM", "qwen3", Architecture::qwen3, 151936, 4096, 22016, 32, 32, 32, 128, 32768, {}, {}},
}};

class Reader {
 public:
  Reader(const json::Value& config, const std::string& source) : config_(config), source_(source) {}

  const json::Value* get(std::string_view key) const {
    const json::Value* v = config_.find(key);
    return v && !v->is_null() ? v : nullptr;
  }

  int64_t integer(std::string_view key, int64_t fallback) const {
    const json::Value* v = get(key);
    if (!v) return fallback;
    if (!v->is_int()) fail(key, "must be an integer");
    return v->as_int();
  }
  int64_t positive(std::string_view key, int64_t fallback) const {
    const int64_t n = integer(key, fallback);
    if (n <= 0) fail(key, "must be positive, got " + std::to_string(n));
    return n;
  }
  double number(const json::Value& object, std::string_view key, double fallback) const {
    const json::Value* v = object.find(key);
    if (!v || v->is_null()) return fallback;
    if (!v->is_number()) fail(key, "must be a number");
    return v->as_double();
  }
  std::optional<double> optional_number(const json::Value& object, std::string_view key) const {
    const json::Value* v = object.find(key);
    if (!v || v->is_null()) return std::nullopt;
    return number(object, key, 0);
  }
  bool boolean(std::string_view key, bool fallback) const {
    const json::Value* v = get(key);
    if (!v) return fallback;
    if (!v->is_bool()) fail(key, "must be true or false");
    return v->as_bool();
  }
  std::string string(std::string_view key, std::string_view fallback) const {
    const json::Value* v = get(key);
    if (!v) return std::string(fallback);
    if (!v->is_string()) fail(key, "must be a string");
    return v->as_string();
  }

  [[noreturn]] void fail(std::string_view key, const std::string& what) const {
    throw_error(source_, ": ", key, " ", what);
  }

 private:
  const json::Value& config_;
  const std::string& source_;
};

// Python's str() of a float, as Transformers' messages print values.
std::string py(double d) {
  return json::python_float_repr(d);
}

// A length inside an object of the config; some configs write it as a float (8192.0).
int64_t positive_integer(const json::Value& v, std::string_view key, const Reader& r) {
  if (v.is_int()) {
    if (v.as_int() <= 0) r.fail(key, "must be positive, got " + std::to_string(v.as_int()));
    return v.as_int();
  }
  if (!v.is_number() || !(v.as_double() >= 1 && v.as_double() <= 0x1p53) ||
      v.as_double() != std::floor(v.as_double())) {
    r.fail(key, "must be a positive integer, got " + json::dump(v));
  }
  return static_cast<int64_t>(v.as_double());
}

const ArchitectureDefaults& find_architecture(const json::Value& config, const std::string& source) {
  const json::Value* architectures = config.find("architectures");
  std::string name;
  if (architectures && architectures->is_array() && architectures->size() > 0 &&
      (*architectures)[0].is_string()) {
    name = (*architectures)[0].as_string();
    for (const auto& a : kArchitectures) {
      if (a.name == name) return a;
    }
  } else if (const json::Value* type = config.find("model_type"); type && type->is_string()) {
    name = "model_type " + type->as_string();
    for (const auto& a : kArchitectures) {
      if (a.model_type == type->as_string()) return a;
    }
  } else {
    throw_error(source, ": neither 'architectures' nor 'model_type' says which model this is");
  }
  std::string supported;
  for (const auto& a : kArchitectures) supported += (supported.empty() ? "" : ", ") + std::string(a.name);
  throw_error(source, ": architecture ", name, " is not supported (supported: ", supported, ")");
}

RopeParameters read_rope(const json::Value& config, const Reader& r, const ModelConfig& c,
                         const std::string& source) {
  // v5 writes rope_parameters; v4 wrote rope_theta beside an optional rope_scaling. rope_scaling wins, as in
  // Transformers' convert_rope_params_to_dict.
  const json::Value* params = r.get("rope_scaling");
  if (!params) params = r.get("rope_parameters");
  static const json::Value kEmpty = json::Object{};
  if (!params) params = &kEmpty;
  if (!params->is_object()) r.fail("rope_parameters", "must be an object");

  RopeParameters rope;
  const json::Value* type = params->find("rope_type");
  if (!type || type->is_null()) type = params->find("type");
  if (type && !type->is_null()) {
    if (!type->is_string()) r.fail("rope_type", "must be a string");
    rope.rope_type = type->as_string();
  }
  const std::string& t = rope.rope_type;
  if (t != "default" && t != "linear" && t != "dynamic" && t != "llama3" && t != "yarn") {
    throw_error(source, ": rope_type '", t,
                "' is not supported (supported: default, linear, dynamic, llama3, yarn)");
  }
  // Transformers' _check_received_keys. rope_theta and original_max_position_embeddings are never missing:
  // standardize_rope_params fills them in from the top level of the config.
  std::vector<std::string> required;
  if (t != "default") required.push_back("factor");
  if (t == "llama3") required.insert(required.end(), {"high_freq_factor", "low_freq_factor"});
  std::string missing;
  for (const std::string& key : required) {
    const json::Value* v = params->find(key);
    if (!v || v->is_null()) missing += (missing.empty() ? "'" : ", '") + key + "'";
  }
  if (!missing.empty()) {
    throw_error(source, ": Missing required keys in `rope_parameters` for 'rope_type'='", t, "': {", missing,
                "}");
  }

  const json::Value* theta_at_top = r.get("rope_theta");
  rope.rope_theta =
      r.number(*params, "rope_theta", theta_at_top ? r.number(config, "rope_theta", 10000.0) : 10000.0);
  rope.partial_rotary_factor =
      r.number(*params, "partial_rotary_factor", r.number(config, "partial_rotary_factor", 1.0));
  rope.factor = r.number(*params, "factor", 1.0);
  rope.low_freq_factor = r.number(*params, "low_freq_factor", 1.0);
  rope.high_freq_factor = r.number(*params, "high_freq_factor", 4.0);
  const json::Value* original = params->find("original_max_position_embeddings");
  rope.original_max_position_embeddings =
      original && !original->is_null()
          ? positive_integer(*original, "original_max_position_embeddings", r)
          : r.positive("original_max_position_embeddings", c.max_position_embeddings);
  rope.attention_factor = r.optional_number(*params, "attention_factor");
  rope.beta_fast = r.optional_number(*params, "beta_fast");
  rope.beta_slow = r.optional_number(*params, "beta_slow");
  rope.mscale = r.optional_number(*params, "mscale");
  rope.mscale_all_dim = r.optional_number(*params, "mscale_all_dim");
  if (const json::Value* v = params->find("truncate"); v && v->is_bool()) rope.truncate = v->as_bool();

  // Transformers only warns about a factor below 1, in these words; one that is not positive (or NaN) makes
  // the frequencies infinite or NaN, and so every logit NaN, so it is an error.
  if (t != "default") {
    const std::string what =
        "`rope_parameters`'s factor field must be a float or int >= 1, got " + py(rope.factor);
    if (!(rope.factor > 0) || !std::isfinite(rope.factor)) throw_error(source, ": ", what);
    if (rope.factor < 1) logging::log(logging::Level::warning, source + ": " + what);
  }
  if (t == "llama3" && !(rope.high_freq_factor > rope.low_freq_factor)) {  // a division by zero or worse
    throw_error(source,
                ": `rope_parameters`'s high_freq_factor field must be greater than low_freq_factor, got "
                "high_freq_factor=",
                py(rope.high_freq_factor), " and low_freq_factor=", py(rope.low_freq_factor));
  }
  if (!(rope.rope_theta > 0) || !std::isfinite(rope.rope_theta)) {
    throw_error(source, ": rope_theta must be a positive number, got ", py(rope.rope_theta));
  }
  if (!(rope.partial_rotary_factor > 0 && rope.partial_rotary_factor <= 1)) {
    throw_error(source, ": partial_rotary_factor must be in (0, 1], got ", py(rope.partial_rotary_factor));
  }
  return rope;
}

void read_sliding_windows(const json::Value& config, const Reader& r, ModelConfig& c,
                          const std::string& source) {
  if (c.architecture == Architecture::llama) return;
  // An explicit null turns the window off; an absent field means Transformers' default of 4096.
  const json::Value* field = config.find("sliding_window");
  if (field && field->is_null()) return;
  const int64_t window = r.positive("sliding_window", 4096);
  if (c.architecture == Architecture::mistral) {  // Mistral slides on every layer
    c.sliding_window = window;
    return;
  }
  // Qwen2/Qwen3 slide only with use_sliding_window, on the layers layer_types marks, or else on those from
  // max_window_layers on.
  if (!r.boolean("use_sliding_window", false)) return;
  c.sliding_window = window;
  if (const json::Value* types = r.get("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != c.num_hidden_layers) {
      r.fail("layer_types", "must list one type per layer");
    }
    for (const json::Value& type : types->as_array()) {
      if (!type.is_string()) r.fail("layer_types", "must hold strings");
      if (type.as_string() != "sliding_attention" && type.as_string() != "full_attention") {
        throw_error(source, ": layer type '", type.as_string(), "' is not supported");
      }
      c.sliding_layers.push_back(type.as_string() == "sliding_attention");
    }
    return;
  }
  c.first_sliding_layer = std::max<int64_t>(r.integer("max_window_layers", 28), 0);
}

std::vector<int64_t> read_token_ids(const json::Value* v, const Reader& r, std::string_view key) {
  std::vector<int64_t> ids;
  if (!v || v->is_null()) return ids;
  if (v->is_int()) return {v->as_int()};
  if (!v->is_array()) r.fail(key, "must be an integer or a list of integers");
  for (const json::Value& id : v->as_array()) {
    if (!id.is_int()) r.fail(key, "must be an integer or a list of integers");
    ids.push_back(id.as_int());
  }
  return ids;
}

}  // namespace

ModelConfig ModelConfig::from_json(const json::Value& config, const std::string& source) {
  check(config.is_object(), source, ": expected a JSON object");
  const ArchitectureDefaults& a = find_architecture(config, source);
  const Reader r(config, source);
  ModelConfig c;
  c.architecture = a.architecture;
  c.architecture_name = std::string(a.name);
  c.vocab_size = r.positive("vocab_size", a.vocab_size);
  c.hidden_size = r.positive("hidden_size", a.hidden_size);
  c.intermediate_size = r.positive("intermediate_size", a.intermediate_size);
  c.num_hidden_layers = r.positive("num_hidden_layers", a.num_hidden_layers);
  c.num_attention_heads = r.positive("num_attention_heads", a.num_attention_heads);
  c.num_key_value_heads = r.positive("num_key_value_heads",
                                     a.num_key_value_heads ? a.num_key_value_heads : c.num_attention_heads);
  c.head_dim = r.positive("head_dim", a.head_dim ? a.head_dim : c.hidden_size / c.num_attention_heads);
  c.max_position_embeddings = r.positive("max_position_embeddings", a.max_position_embeddings);
  c.rms_norm_eps = r.number(config, "rms_norm_eps", 1e-6);
  // Transformers takes any float; a negative or NaN epsilon makes RMSNorm's rsqrt NaN for small activations.
  if (!(c.rms_norm_eps >= 0) || !std::isfinite(c.rms_norm_eps)) {
    r.fail("rms_norm_eps", "must be a non-negative number, got " + py(c.rms_norm_eps));
  }
  c.hidden_act = r.string("hidden_act", "silu");
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);

  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    throw_error(source, ": num_attention_heads (", c.num_attention_heads,
                ") is not a multiple of num_key_value_heads (", c.num_key_value_heads, ")");
  }
  if (c.head_dim % 2 != 0)
    throw_error(source, ": head_dim must be even for rotary embeddings, got ", c.head_dim);
  if (c.hidden_act != "silu" && c.hidden_act != "swish") {
    throw_error(source, ": hidden_act '", c.hidden_act, "' is not supported (supported: silu)");
  }
  switch (c.architecture) {
    case Architecture::llama:
      // LlamaConfig.validate_architecture, even with a head_dim of its own.
      if (c.hidden_size % c.num_attention_heads != 0) {
        throw_error(source, ": The hidden size (", c.hidden_size,
                    ") is not a multiple of the number of attention heads (", c.num_attention_heads, ").");
      }
      c.qkv_bias = c.o_bias = r.boolean("attention_bias", false);
      c.mlp_bias = r.boolean("mlp_bias", false);
      break;
    case Architecture::mistral:
      break;
    case Architecture::qwen2:
      c.qkv_bias = true;
      break;
    case Architecture::qwen3:
      c.qkv_bias = c.o_bias = r.boolean("attention_bias", false);
      c.qk_norm = true;
      break;
  }
  c.rope = read_rope(config, r, c, source);
  if (static_cast<int64_t>(c.head_dim * c.rope.partial_rotary_factor) % 2 != 0) {
    throw_error(source, ": partial_rotary_factor leaves an odd rotary dimension");
  }
  read_sliding_windows(config, r, c, source);

  const json::Value* dtype = r.get("dtype");
  if (!dtype) dtype = r.get("torch_dtype");
  if (dtype) {
    if (!dtype->is_string()) r.fail("dtype", "must be a string");
    try {
      c.dtype = parse_dtype(dtype->as_string());
    } catch (const Error&) {
      throw_error(source, ": unknown dtype '", dtype->as_string(), "'");
    }
  }
  const json::Value* bos = config.find("bos_token_id");
  if (!bos) {
    c.bos_token_id = a.bos;
  } else if (!bos->is_null()) {
    c.bos_token_id = r.integer("bos_token_id", 0);
  }
  c.eos_token_id = config.find("eos_token_id") ? read_token_ids(r.get("eos_token_id"), r, "eos_token_id")
                   : a.eos                     ? std::vector<int64_t>{*a.eos}
                                               : std::vector<int64_t>{};
  if (r.get("pad_token_id")) c.pad_token_id = r.integer("pad_token_id", 0);
  return c;
}

int64_t ModelConfig::window_of(int64_t layer) const {
  const bool slides =
      sliding_layers.empty() ? layer >= first_sliding_layer : sliding_layers.at(static_cast<size_t>(layer));
  return slides ? sliding_window : 0;
}

ModelConfig ModelConfig::from_file(const std::string& path) {
  return from_json(json::parse_file(path), path);
}

}  // namespace tfm

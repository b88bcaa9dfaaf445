#include "tfm/generation/generation_config.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>

#include "tfm/core/error.h"
#include "tfm/core/logging.h"

namespace tfm {
namespace {

// One typed field: how to read it from JSON (null unsets it) and write it back (nullopt when unset). The
// table below is the single list of GenerationConfig's fields, in Transformers' order.
struct Field {
  const char* name;
  std::function<void(GenerationConfig&, const json::Value&)> read;
  std::function<std::optional<json::Value>(const GenerationConfig&)> write;
};

int64_t read_int(const json::Value& v, const char* name) {
  check(v.is_int(), "generation config: `", name, "` must be an integer, found ",
        json::Value::type_name(v.type()));
  return v.as_int();
}
double read_float(const json::Value& v, const char* name) {
  check(v.is_number(), "generation config: `", name, "` must be a number, found ",
        json::Value::type_name(v.type()));
  return v.as_double();
}
bool read_bool(const json::Value& v, const char* name) {
  check(v.is_bool(), "generation config: `", name, "` must be a boolean, found ",
        json::Value::type_name(v.type()));
  return v.as_bool();
}

template <typename T, typename Read>
Field make_field(const char* name, std::optional<T> GenerationConfig::*member, Read read) {
  return Field{name,
               [=](GenerationConfig& c, const json::Value& v) {
                 if (v.is_null()) {
                   c.*member = std::nullopt;
                 } else {
                   c.*member = read(v, name);
                 }
               },
               [=](const GenerationConfig& c) -> std::optional<json::Value> {
                 if (!(c.*member)) return std::nullopt;
                 const T& value = *(c.*member);
                 if constexpr (std::is_same_v<T, std::vector<std::string>> ||
                               std::is_same_v<T, std::vector<int64_t>>) {
                   json::Array a;
                   for (const auto& x : value) a.emplace_back(x);
                   return json::Value(std::move(a));
                 } else {
                   return json::Value(value);
                 }
               }};
}

Field int_field(const char* name, std::optional<int64_t> GenerationConfig::*m) {
  return make_field(name, m, read_int);
}
Field float_field(const char* name, std::optional<double> GenerationConfig::*m) {
  return make_field(name, m, read_float);
}
Field bool_field(const char* name, std::optional<bool> GenerationConfig::*m) {
  return make_field(name, m, read_bool);
}

// A list of token ids; a single integer means a list of one (as eos_token_id may be written).
Field int_list_field(const char* name, std::optional<std::vector<int64_t>> GenerationConfig::*m) {
  return make_field(name, m, [](const json::Value& v, const char* key) {
    if (v.is_int()) return std::vector<int64_t>{v.as_int()};
    check(v.is_array(), "generation config: `", key, "` must be an integer or a list of integers");
    std::vector<int64_t> out;
    for (const json::Value& id : v.as_array()) {
      check(id.is_int(), "generation config: `", key, "` must be an integer or a list of integers");
      out.push_back(id.as_int());
    }
    return out;
  });
}

const std::vector<Field>& fields() {
  using C = GenerationConfig;
  static const std::vector<Field> table = {
      int_field("max_length", &C::max_length),
      int_field("max_new_tokens", &C::max_new_tokens),
      int_field("min_length", &C::min_length),
      int_field("min_new_tokens", &C::min_new_tokens),
      float_field("max_time", &C::max_time),
      make_field(
          "stop_strings", &C::stop_strings,
          [](const json::Value& v, const char* name) {
            // A single string means a list of one, as StopStringCriteria treats it.
            if (v.is_string()) return std::vector<std::string>{v.as_string()};
            check(v.is_array(), "generation config: `", name, "` must be a string or a list of strings");
            std::vector<std::string> out;
            for (const json::Value& s : v.as_array()) {
              check(s.is_string(), "generation config: `", name, "` must be a string or a list of strings");
              out.push_back(s.as_string());
            }
            return out;
          }),
      bool_field("do_sample", &C::do_sample),
      int_field("num_beams", &C::num_beams),
      float_field("temperature", &C::temperature),
      int_field("top_k", &C::top_k),
      float_field("top_p", &C::top_p),
      float_field("min_p", &C::min_p),
      float_field("typical_p", &C::typical_p),
      float_field("epsilon_cutoff", &C::epsilon_cutoff),
      float_field("eta_cutoff", &C::eta_cutoff),
      float_field("repetition_penalty", &C::repetition_penalty),
      int_field("no_repeat_ngram_size", &C::no_repeat_ngram_size),
      int_field("forced_bos_token_id", &C::forced_bos_token_id),
      int_list_field("forced_eos_token_id", &C::forced_eos_token_id),
      bool_field("remove_invalid_values", &C::remove_invalid_values),
      int_list_field("suppress_tokens", &C::suppress_tokens),
      int_list_field("begin_suppress_tokens", &C::begin_suppress_tokens),
      bool_field("renormalize_logits", &C::renormalize_logits),
      int_field("pad_token_id", &C::pad_token_id),
      int_field("bos_token_id", &C::bos_token_id),
      int_list_field("eos_token_id", &C::eos_token_id),
      make_field("seed", &C::seed,
                 [](const json::Value& v, const char* name) {
                   const int64_t s = read_int(v, name);
                   check(s >= 0, "generation config: `seed` must be non-negative, but is ", s);
                   return static_cast<uint64_t>(s);
                 }),
  };
  return table;
}

const Field* find_field(std::string_view name) {
  for (const Field& f : fields()) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

// The entry of `other` named key (of a const or mutable object), or nullptr.
template <typename Object>
auto find_other(Object& other, std::string_view key) -> decltype(&other.front().second) {
  for (auto& member : other) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

// Python's str() of a float, as Transformers' messages print values.
std::string py(double d) {
  return json::python_float_repr(d);
}
// Python's str() of a JSON value (strings bare, True/False/None capitalised).
std::string py(const json::Value& v) {
  if (v.is_string()) return v.as_string();
  if (v.is_bool()) return v.as_bool() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_float()) return py(v.as_double());
  return json::dump(v);
}

// Transformers' _should_warn: a flag conflicting with do_sample is reported unless the caller set do_sample
// and left the flag alone (the flag then came from the model's generation_config.json).
bool should_warn(const std::set<std::string>* user_set, const std::string& outer, const std::string& inner) {
  const bool outer_set = user_set != nullptr && user_set->count(outer) > 0;
  const bool inner_set = user_set != nullptr && user_set->count(inner) > 0;
  return !(outer_set && !inner_set);
}

// Minor issues as (flag, description), in Transformers' order.
using Issues = std::vector<std::pair<std::string, std::string>>;

Issues validate_with(const GenerationConfig& c, const std::set<std::string>* user_set) {
  Issues issues;

  if (const json::Value* es = find_other(c.other, "early_stopping")) {
    check(es->is_null() || es->is_bool() || (es->is_string() && es->as_string() == "never"),
          "`early_stopping` must be a boolean or 'never', but is ", py(*es), ".");
  }
  if (c.max_new_tokens && *c.max_new_tokens <= 0) {
    throw_error("`max_new_tokens` must be greater than 0, but is ", *c.max_new_tokens, ".");
  }
  if (c.pad_token_id && *c.pad_token_id < 0) {
    issues.emplace_back(
        "pad_token_id",
        "`pad_token_id` should be positive but got " + std::to_string(*c.pad_token_id) +
            ". This will cause errors when batch generating, if there is padding. Please set "
            "`pad_token_id` explicitly as `model.generation_config.pad_token_id=PAD_TOKEN_ID` to avoid "
            "errors in generation");
  }
  if (const json::Value* ci = find_other(c.other, "cache_implementation"); ci && !ci->is_null()) {
    static const std::vector<std::string> valid = {"static",
                                                   "offloaded_static",
                                                   "sliding_window",
                                                   "hybrid",
                                                   "hybrid_chunked",
                                                   "offloaded_hybrid",
                                                   "offloaded_hybrid_chunked",
                                                   "dynamic",
                                                   "offloaded",
                                                   "quantized",
                                                   "paged"};
    const bool ok = ci->is_string() && std::find(valid.begin(), valid.end(), ci->as_string()) != valid.end();
    check(ok, "Invalid `cache_implementation` (", py(*ci),
          "). Choose one of: ('static', "
          "'offloaded_static', 'sliding_window', 'hybrid', 'hybrid_chunked', 'offloaded_hybrid', "
          "'offloaded_hybrid_chunked', 'dynamic', 'offloaded', 'quantized', 'paged')");
  }

  if (c.do_sample != true) {
    auto greedy_issue = [&](const std::string& flag, const std::string& value) {
      if (!should_warn(user_set, "do_sample", flag)) return;
      issues.emplace_back(flag,
                          "`do_sample` is not set to `True`. However, `" + flag + "` is set to `" + value +
                              "` -- this flag is only used in sample-based generation modes. You should set "
                              "`do_sample=True` or unset `" +
                              flag + "`.");
    };
    if (c.temperature && *c.temperature != 1.0) greedy_issue("temperature", py(*c.temperature));
    if (c.top_p && *c.top_p != 1.0) greedy_issue("top_p", py(*c.top_p));
    if (c.min_p) greedy_issue("min_p", py(*c.min_p));
    if (const json::Value* top_h = find_other(c.other, "top_h"); top_h && !top_h->is_null()) {
      greedy_issue("top_h", py(*top_h));
    }
    if (c.typical_p && *c.typical_p != 1.0) greedy_issue("typical_p", py(*c.typical_p));
    if (c.top_k && *c.top_k != 50) greedy_issue("top_k", std::to_string(*c.top_k));
    if (c.epsilon_cutoff && *c.epsilon_cutoff != 0.0) greedy_issue("epsilon_cutoff", py(*c.epsilon_cutoff));
    if (c.eta_cutoff && *c.eta_cutoff != 0.0) greedy_issue("eta_cutoff", py(*c.eta_cutoff));
  }

  if (!c.num_beams || *c.num_beams == 1) {
    auto beam_issue = [&](const std::string& flag, const json::Value& value) {
      if (!should_warn(user_set, "num_beams", flag)) return;
      issues.emplace_back(flag,
                          "`num_beams` is set to " + (c.num_beams ? std::to_string(*c.num_beams) : "None") +
                              ". However, `" + flag + "` is set to `" + py(value) +
                              "` -- this flag is only used in beam-based generation modes. You should set "
                              "`num_beams>1` or unset `" +
                              flag + "`.");
    };
    const json::Value* es = find_other(c.other, "early_stopping");
    if (es && !es->is_null() && !(es->is_bool() && !es->as_bool())) beam_issue("early_stopping", *es);
    const json::Value* lp = find_other(c.other, "length_penalty");
    if (lp && lp->is_number() && lp->as_double() != 1.0) beam_issue("length_penalty", *lp);
  }

  if (const json::Value* n = find_other(c.other, "num_return_sequences");
      n && n->is_int() && n->as_int() > 1) {
    if (!c.num_beams || *c.num_beams == 1) {
      check(c.do_sample == true,
            "Greedy methods (do_sample != True) without beam search do not support `num_return_sequences` "
            "different than 1 (got ",
            n->as_int(), ").");
    } else {
      check(n->as_int() <= *c.num_beams, "`num_return_sequences` (", n->as_int(),
            ") has to be smaller or equal to `num_beams` (", *c.num_beams, ").");
    }
  }

  // Forcing a token that is also suppressed leaves every score at -inf.
  if (c.suppress_tokens) {
    const std::set<int64_t> suppressed(c.suppress_tokens->begin(), c.suppress_tokens->end());
    auto check_forced = [&](const char* attr, const std::vector<int64_t>& forced) {
      const std::set<int64_t> f(forced.begin(), forced.end());
      if (f.empty() || !std::includes(suppressed.begin(), suppressed.end(), f.begin(), f.end())) return;
      std::string list;
      for (int64_t id : f) list += (list.empty() ? "" : ", ") + std::to_string(id);
      throw_error(
          "Every token in `", attr, "` ([", list,
          "]) is also in `suppress_tokens`. Forcing a token while suppressing it sets all logits to `-inf` "
          "at the forcing step, which produces `nan` probabilities and crashes generation. Remove the "
          "overlapping token(s) from either `",
          attr,
          "` or `suppress_tokens` (if you meant to prevent an early EOS token, use `min_new_tokens` "
          "instead).");
    };
    if (c.forced_bos_token_id) check_forced("forced_bos_token_id", {*c.forced_bos_token_id});
    if (c.forced_eos_token_id) check_forced("forced_eos_token_id", *c.forced_eos_token_id);
  }

  for (const char* arg :
       {"logits_processor", "stopping_criteria", "prefix_allowed_tokens_fn", "synced_gpus", "assistant_model",
        "streamer", "negative_prompt_ids", "negative_prompt_attention_mask"}) {
    check(find_other(c.other, arg) == nullptr, "Argument `", arg,
          "` is not a valid argument of `GenerationConfig`. It should be passed to `generate()` (or a "
          "pipeline) "
          "directly.");
  }
  return issues;
}

std::vector<std::string> update_with(GenerationConfig& c, const json::Object& kwargs, bool defaults_only,
                                     bool allow_custom_entries, std::set<std::string>& updated) {
  std::vector<std::string> unused;
  for (const auto& [key, value] : kwargs) {
    if (const Field* f = find_field(key)) {
      if (!defaults_only || !f->write(c)) {
        f->read(c, value);
        updated.insert(key);
      }
    } else if (json::Value* existing = find_other(c.other, key)) {
      if (!defaults_only || existing->is_null()) {
        *existing = value;
        updated.insert(key);
      }
    } else if (allow_custom_entries) {
      c.other.emplace_back(key, value);
      updated.insert(key);
    } else {
      unused.push_back(key);
    }
  }
  return unused;
}

}  // namespace

GenerationConfig GenerationConfig::from_json(const json::Value& value) {
  check(value.is_object(), "generation config must be a JSON object, found ",
        json::Value::type_name(value.type()));
  GenerationConfig c;
  std::set<std::string> user_set;
  update_with(c, value.as_object(), false, true, user_set);
  validate_with(c, &user_set);
  return c;
}

GenerationConfig GenerationConfig::from_file(const std::string& path) {
  const json::Value value = json::parse_file(path);
  try {
    return from_json(value);
  } catch (const Error& e) {
    throw_error(path, ": ", e.what());
  }
}

json::Value GenerationConfig::to_json() const {
  json::Object out;
  for (const Field& f : fields()) {
    if (auto v = f.write(*this)) out.emplace_back(f.name, std::move(*v));
  }
  for (const auto& member : other) out.push_back(member);
  return json::Value(std::move(out));
}

std::vector<std::string> GenerationConfig::update(const json::Object& kwargs, bool defaults_only,
                                                  bool allow_custom_entries) {
  std::set<std::string> updated;
  std::vector<std::string> unused = update_with(*this, kwargs, defaults_only, allow_custom_entries, updated);
  validate_with(*this, &updated);
  return unused;
}

std::vector<std::string> GenerationConfig::validate() const {
  std::vector<std::string> out;
  for (auto& [flag, description] : validate_with(*this, nullptr)) out.push_back(description);
  return out;
}

const json::Object& GenerationConfig::global_defaults() {
  static const json::Object defaults = {
      {"max_length", 20},
      {"min_length", 0},
      {"do_sample", false},
      {"use_cache", true},
      {"early_stopping", false},
      {"num_beams", 1},
      {"temperature", 1.0},
      {"top_k", 50},
      {"top_p", 1.0},
      {"typical_p", 1.0},
      {"repetition_penalty", 1.0},
      {"length_penalty", 1.0},
      {"no_repeat_ngram_size", 0},
      {"encoder_no_repeat_ngram_size", 0},
      {"bad_words_ids", nullptr},
      {"num_return_sequences", 1},
      {"output_scores", false},
      {"return_dict_in_generate", false},
      {"forced_bos_token_id", nullptr},
      {"forced_eos_token_id", nullptr},
      {"remove_invalid_values", false},
      {"exponential_decay_length_penalty", nullptr},
      {"suppress_tokens", nullptr},
      {"begin_suppress_tokens", nullptr},
      {"epsilon_cutoff", 0.0},
      {"eta_cutoff", 0.0},
      {"encoder_repetition_penalty", 1.0},
      {"num_assistant_tokens", 20},
      {"num_assistant_tokens_schedule", "constant"},
      {"assistant_confidence_threshold", 0.4},
      {"assistant_lookbehind", 10},
      {"target_lookbehind", 10},
      {"num_beam_groups", 1},
      {"diversity_penalty", 0.0},
  };
  return defaults;
}

namespace {

// Every attribute a fresh Transformers GenerationConfig has (GenerationConfig().__dict__), so that generate()
// accepts each of them as a kwarg. The typed fields of GenerationConfig are among them.
const std::vector<std::string_view>& transformers_attributes() {
  static const std::vector<std::string_view> names = {"max_length",
                                                      "max_new_tokens",
                                                      "min_length",
                                                      "min_new_tokens",
                                                      "early_stopping",
                                                      "max_time",
                                                      "stop_strings",
                                                      "do_sample",
                                                      "num_beams",
                                                      "use_mtp",
                                                      "use_cache",
                                                      "cache_implementation",
                                                      "cache_config",
                                                      "max_cache_len",
                                                      "temperature",
                                                      "top_k",
                                                      "top_p",
                                                      "min_p",
                                                      "top_h",
                                                      "typical_p",
                                                      "epsilon_cutoff",
                                                      "eta_cutoff",
                                                      "repetition_penalty",
                                                      "encoder_repetition_penalty",
                                                      "length_penalty",
                                                      "no_repeat_ngram_size",
                                                      "bad_words_ids",
                                                      "renormalize_logits",
                                                      "forced_bos_token_id",
                                                      "forced_eos_token_id",
                                                      "remove_invalid_values",
                                                      "exponential_decay_length_penalty",
                                                      "suppress_tokens",
                                                      "begin_suppress_tokens",
                                                      "sequence_bias",
                                                      "token_healing",
                                                      "guidance_scale",
                                                      "watermarking_config",
                                                      "num_return_sequences",
                                                      "output_attentions",
                                                      "output_hidden_states",
                                                      "output_scores",
                                                      "output_logits",
                                                      "return_dict_in_generate",
                                                      "pad_token_id",
                                                      "bos_token_id",
                                                      "eos_token_id",
                                                      "encoder_no_repeat_ngram_size",
                                                      "decoder_start_token_id",
                                                      "is_assistant",
                                                      "num_assistant_tokens",
                                                      "num_assistant_tokens_schedule",
                                                      "assistant_confidence_threshold",
                                                      "prompt_lookup_num_tokens",
                                                      "max_matching_ngram_size",
                                                      "assistant_early_exit",
                                                      "assistant_lookbehind",
                                                      "target_lookbehind",
                                                      "assistant_ensemble_weight",
                                                      "speculation_type",
                                                      "compile_config",
                                                      "disable_compile",
                                                      "continuous_batching_config",
                                                      "low_memory",
                                                      "penalty_alpha",
                                                      "dola_layers",
                                                      "diversity_penalty",
                                                      "num_beam_groups",
                                                      "constraints",
                                                      "force_words_ids",
                                                      "prefill_chunk_size",
                                                      "transformers_version"};
  return names;
}

}  // namespace

PreparedGenerationConfig prepare_generation_config(const GenerationConfig& model_config,
                                                   const json::Object& kwargs) {
  auto kwarg_set = [&](std::string_view key) {
    for (const auto& [k, v] : kwargs) {
      if (k == key) return !v.is_null();
    }
    return false;
  };
  PreparedGenerationConfig out;
  out.has_default_max_length = !kwarg_set("max_length") && !model_config.max_length;
  out.has_default_min_length = !kwarg_set("min_length") && !model_config.min_length;

  // Transformers validates at every update step below and logs what it finds: a summary at warning level,
  // the details at info level, each distinct message once.
  auto report = [](const Issues& issues) {
    if (issues.empty()) return;
    std::string flags, details;
    for (const auto& [flag, description] : issues) {
      flags += (flags.empty() ? "'" : ", '") + flag + "'";
      details += "- `" + flag + "`: " + description + "\n";
    }
    std::string summary = "The following generation flags are not valid and may be ignored: [" + flags + "].";
    if (!logging::enabled(logging::Level::info))
      summary += " Set `TRANSFORMERS_VERBOSITY=info` for more details.";
    logging::log_once(logging::Level::warning, summary);
    logging::log_once(logging::Level::info,
                      details +
                          "If you're using a pretrained model, note that some of these attributes may be set "
                          "through the model's `generation_config.json` file.");
  };
  auto update_step = [&](const json::Object& values, bool defaults_only, bool allow_custom_entries) {
    std::set<std::string> updated;
    std::vector<std::string> unused =
        update_with(out.config, values, defaults_only, allow_custom_entries, updated);
    report(validate_with(out.config, &updated));
    return unused;
  };

  // generate(): a fresh config takes the model's values, then the global defaults for what is still unset,
  // then the call's kwargs. A fresh Transformers config has every attribute (unset), so `other` gets the ones
  // that neither the model nor tfm's fields have.
  update_step(model_config.to_json().as_object(), /*defaults_only=*/true, /*allow_custom_entries=*/true);
  for (std::string_view key : transformers_attributes()) {
    if (!find_field(key) && !find_other(out.config.other, key)) out.config.other.emplace_back(key, nullptr);
  }
  update_step(GenerationConfig::global_defaults(), /*defaults_only=*/true, /*allow_custom_entries=*/false);

  const std::vector<std::string> unused = update_step(kwargs, false, false);
  if (!unused.empty()) {
    std::ostringstream names;
    names << "[";
    for (size_t i = 0; i < unused.size(); ++i) names << (i ? ", '" : "'") << unused[i] << "'";
    names << "]";
    throw_error("The following `model_kwargs` are not used by the model: ", names.str(),
                " (note: typos in the generate arguments will also show up in this list)");
  }

  // _prepare_generated_length's warnings, which do not depend on the prompt. Transformers repeats them on
  // every call; once is enough to say it (a chat would repeat them on every turn).
  const GenerationConfig& c = out.config;
  auto both_set = [](const char* tokens, int64_t new_tokens, const char* length, int64_t value) {
    logging::log_once(logging::Level::warning,
                      "Both `" + std::string(tokens) + "` (=" + std::to_string(new_tokens) + ") and `" +
                          length + "`(=" + std::to_string(value) + ") seem to have been set. `" + tokens +
                          "` will take precedence. Please refer to the documentation for more information. "
                          "(https://huggingface.co/docs/transformers/main/en/main_classes/text_generation)");
  };
  if (c.max_new_tokens && !out.has_default_max_length && c.max_length) {
    both_set("max_new_tokens", *c.max_new_tokens, "max_length", *c.max_length);
  }
  if (c.min_new_tokens && !out.has_default_min_length) {
    both_set("min_new_tokens", *c.min_new_tokens, "min_length", c.min_length.value_or(0));
  }
  return out;
}

namespace {
// Lengths from a user's numbers: max_new_tokens may be as large as int64 holds.
int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<int64_t>::max() : sum;
}
}  // namespace

LengthLimits resolve_length_limits(const PreparedGenerationConfig& prepared, int64_t prompt_length,
                                   std::optional<int64_t> max_position_embeddings) {
  const GenerationConfig& c = prepared.config;
  check(prompt_length >= 0, "prompt length must be non-negative, but is ", prompt_length);
  LengthLimits out;
  // The defaults always set these; a config that skipped prepare_generation_config gets them here too.
  int64_t max_length = c.max_length.value_or(20);
  int64_t min_length = c.min_length.value_or(0);

  if (c.max_new_tokens) {
    max_length = saturating_add(*c.max_new_tokens, prompt_length);
  } else if (prepared.has_default_max_length) {  // by default, 20 new tokens
    max_length += prompt_length;
    if (max_position_embeddings) max_length = std::min(max_length, *max_position_embeddings);
  }
  if (c.min_new_tokens) {
    min_length = saturating_add(*c.min_new_tokens, prompt_length);
  }

  // _validate_generated_length. Its warnings are Python UserWarnings, which Python shows once per message.
  if (prepared.has_default_max_length && !c.max_new_tokens) {
    logging::log_once(
        logging::Level::warning,
        "Using the model-agnostic default `max_length` (=" + std::to_string(max_length) +
            ") to control the generation length. We recommend setting `max_new_tokens` to control "
            "the maximum length of the generation.");
  }
  check(prompt_length < max_length, "Input length of input_ids is ", prompt_length,
        ", but `max_length` is set to ", max_length,
        ". This can lead to unexpected behavior. You should consider increasing `max_length` or, better yet, "
        "setting `max_new_tokens`.");
  std::string suffix =
      " Generation will stop at the defined maximum length. You should decrease the minimum length and/or "
      "increase "
      "the maximum length.";
  if (prepared.has_default_max_length) {
    suffix += " Note that `max_length` is set to " + std::to_string(max_length) + ", its default value.";
  }
  if (min_length > max_length) {
    logging::log_once(logging::Level::warning, "Unfeasible length constraints: `min_length` (" +
                                                   std::to_string(min_length) +
                                                   ") is larger than the maximum possible length (" +
                                                   std::to_string(max_length) + ")." + suffix);
  }
  if (c.min_new_tokens && saturating_add(*c.min_new_tokens, prompt_length) > max_length) {
    logging::log_once(logging::Level::warning,
                      "Unfeasible length constraints: `min_new_tokens` (" +
                          std::to_string(*c.min_new_tokens) + "), when added to the prompt length (" +
                          std::to_string(prompt_length) + "), is larger than the maximum possible length (" +
                          std::to_string(max_length) + ")." + suffix);
  }
  out.max_length = max_length;
  out.min_length = min_length;
  return out;
}

}  // namespace tfm

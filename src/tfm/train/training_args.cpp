#include "tfm/train/training_args.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>

#include "tfm/core/error.h"
#include "tfm/jinja/value.h"

namespace tfm {
namespace {

using Args = TrainingArguments;

// Python's repr() of a str, as Transformers' messages print the strings of a list.
std::string py_repr(std::string_view s) {
  return jinja::Value(s).repr();
}

std::string py_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + py_repr(items[i]);
  return out + "]";
}

std::string py_float(double d) {
  return json::python_float_repr(d);
}

// The text Python's int() and float() read: surrounding whitespace dropped, and the underscores it allows
// between digits removed; nullopt where an underscore is misplaced.
std::optional<std::string> python_number_text(std::string_view text) {
  const auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  std::string out;
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '_') {
      out += text[i];
    } else if (i == 0 || i + 1 == text.size() || !digit(text[i - 1]) || !digit(text[i + 1])) {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<int64_t> python_int(std::string_view text) {
  std::optional<std::string> t = python_number_text(text);
  if (!t || t->empty()) return std::nullopt;
  const char* begin = t->data();
  if (*begin == '+' && t->size() > 1 && (*t)[1] != '-') ++begin;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(begin, t->data() + t->size(), value);
  if (ec != std::errc() || end != t->data() + t->size()) return std::nullopt;
  return value;
}

std::optional<double> python_float(std::string_view text) {
  std::optional<std::string> t = python_number_text(text);
  if (!t || t->empty()) return std::nullopt;
  const char* begin = t->data();
  if (*begin == '+' && t->size() > 1 && (*t)[1] != '-') ++begin;
  double value = 0;
  const auto [end, ec] = std::from_chars(begin, t->data() + t->size(), value);
  // Out of range is fine for Python: it rounds to inf or 0.
  if ((ec != std::errc() && ec != std::errc::result_out_of_range) || end != t->data() + t->size())
    return std::nullopt;
  if (ec == std::errc::result_out_of_range) value = std::strtod(t->c_str(), nullptr);
  return value;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// HfArgumentParser's string_to_bool.
std::optional<bool> string_to_bool(std::string_view text) {
  const std::string v = lower(text);
  if (v == "yes" || v == "true" || v == "t" || v == "y" || v == "1") return true;
  if (v == "no" || v == "false" || v == "f" || v == "n" || v == "0") return false;
  return std::nullopt;
}

// A named choice: its Transformers value, and what tfm makes of it (nullopt: a value Transformers has but tfm
// does not support, with the reason).
template <typename E>
struct Choice {
  std::string_view name;
  std::optional<E> value;
  std::string_view unsupported_reason = {};
};

template <typename E>
struct ChoiceSet {
  std::string_view transformers_class;  // named in the messages, as Transformers' enums name themselves
  std::vector<Choice<E>> choices;       // in Transformers' order
};

const ChoiceSet<SchedulerType>& scheduler_types() {
  using S = SchedulerType;
  static const ChoiceSet<S> set{
      "SchedulerType",
      {{"linear", S::linear},
       {"cosine", S::cosine},
       {"cosine_with_restarts", S::cosine_with_restarts},
       {"polynomial", S::polynomial},
       {"constant", S::constant},
       {"constant_with_warmup", S::constant_with_warmup},
       {"inverse_sqrt", S::inverse_sqrt},
       {"reduce_lr_on_plateau", std::nullopt, "it follows evaluation metrics"},
       {"cosine_with_min_lr", S::cosine_with_min_lr},
       {"cosine_warmup_with_min_lr", S::cosine_warmup_with_min_lr},
       {"warmup_stable_decay", S::warmup_stable_decay},
       {"greedy", std::nullopt, "it follows evaluation metrics"}}};
  return set;
}

const ChoiceSet<IntervalStrategy>& interval_strategies() {
  using I = IntervalStrategy;
  static const ChoiceSet<I> set{"IntervalStrategy", {{"no", I::no}, {"steps", I::steps}, {"epoch", I::epoch}}};
  return set;
}

const ChoiceSet<IntervalStrategy>& save_strategies() {
  using I = IntervalStrategy;
  static const ChoiceSet<I> set{
      "SaveStrategy",
      {{"no", I::no},
       {"steps", I::steps},
       {"epoch", I::epoch},
       {"best", std::nullopt, "it saves on the best evaluation metric, which tfm does not track"}}};
  return set;
}

template <typename E>
std::string_view name_of(const ChoiceSet<E>& set, E value) {
  for (const Choice<E>& c : set.choices) {
    if (c.value == value) return c.name;
  }
  return "?";
}

// `invalid_name` builds the message for a name Transformers does not know either: argparse's on the command
// line, the enum's own in a JSON file.
template <typename E>
E choose(const ChoiceSet<E>& set, std::string_view field, std::string_view text,
         const std::function<std::string(const std::vector<std::string>&)>& invalid_name) {
  for (const Choice<E>& c : set.choices) {
    if (c.name != text) continue;
    if (!c.value) throw_error(field, " ", text, " is not supported by tfm: ", c.unsupported_reason);
    return *c.value;
  }
  std::vector<std::string> names;
  for (const Choice<E>& c : set.choices) names.emplace_back(c.name);
  throw Error(invalid_name(names));
}

// What argparse calls an option: a word starting with '-' that is not "-", not a negative number and has no
// space. Anything else after a flag is its value.
bool looks_like_option(std::string_view word) {
  if (word.size() < 2 || word[0] != '-' || word.find(' ') != std::string_view::npos) return false;
  std::string_view rest = word.substr(1);
  const auto digits = [](std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const size_t dot = rest.find('.');
  const bool negative_number =
      dot == std::string_view::npos ? digits(rest)
                                    : (digits(rest.substr(dot + 1)) &&
                                       (dot == 0 || digits(rest.substr(0, dot))));
  return !negative_number;
}

std::string json_type(const json::Value& v) {
  return std::string(json::Value::type_name(v.type()));
}

// TrainingArguments' _convert_str_dict: string values of a dict given as JSON text become booleans, ints or
// floats where they read as one.
void convert_str_dict(json::Object& dict) {
  const auto digits = [](std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  for (auto& [key, value] : dict) {
    if (value.is_object()) {
      convert_str_dict(value.as_object());
    } else if (value.is_string()) {
      const std::string s = value.as_string();
      std::string without_dot = s;
      if (const size_t dot = without_dot.find('.'); dot != std::string::npos) without_dot.erase(dot, 1);
      if (lower(s) == "true" || lower(s) == "false") {
        value = lower(s) == "true";
      } else if (digits(s)) {
        const std::optional<int64_t> i = python_int(s);
        if (i) value = *i;  // past int64 it stays text and fails where it is used
      } else if (digits(without_dot)) {
        value = *python_float(s);
      }
    }
  }
}

// lr_scheduler_kwargs as TrainingArguments takes it: a dict, or a string holding a JSON dict.
json::Object read_kwargs(const json::Value& v, std::string_view field) {
  if (v.is_object()) return v.as_object();
  check(v.is_string() && v.as_string().rfind('{', 0) == 0, "`", field,
        "` must be a JSON object (a dict of the scheduler's arguments), found ",
        v.is_string() ? py_repr(v.as_string()) : json_type(v));
  json::Object dict = json::parse(v.as_string()).as_object();
  convert_str_dict(dict);
  return dict;
}

// report_to: tfm reports to no integration, so only the values that mean none are accepted ("all" means every
// installed integration, of which tfm has none).
void check_report_to(const json::Value& v) {
  const auto accepted = [](const json::Value& name) {
    return name.is_string() && (name.as_string() == "none" || name.as_string() == "all");
  };
  if (v.is_array()) {
    for (const json::Value& name : v.as_array()) {
      check(accepted(name), "report_to ", name.is_string() ? name.as_string() : json::dump(name),
            " is not supported: tfm reports to no integration (use \"none\")");
    }
    return;
  }
  check(accepted(v), "report_to ", v.is_string() ? v.as_string() : json::dump(v),
        " is not supported: tfm reports to no integration (use \"none\")");
}

// One field: how a JSON value and a command-line word set it, and how it is written back.
struct Field {
  std::string_view name;
  bool is_bool = false;  // argparse's nargs="?" with const True: the flag alone means true
  std::function<void(Args&, const json::Value&)> from_json;
  std::function<void(Args&, std::string_view text, const std::string& flag)> from_text;
  std::function<json::Value(const Args&)> to_json;
};

[[noreturn]] void wrong_json_type(std::string_view name, std::string_view expected, const json::Value& v) {
  throw_error("training arguments: `", name, "` must be ", expected, ", found ", json_type(v));
}

int64_t json_int(std::string_view name, const json::Value& v) {
  if (!v.is_int()) wrong_json_type(name, "an integer", v);
  return v.as_int();
}
double json_float(std::string_view name, const json::Value& v) {
  if (!v.is_number()) wrong_json_type(name, "a number", v);
  return v.as_double();
}

int64_t text_int(std::string_view text, const std::string& flag) {
  const std::optional<int64_t> value = python_int(text);
  check(value.has_value(), "argument ", flag, ": invalid int value: ", py_repr(text));
  return *value;
}
double text_float(std::string_view text, const std::string& flag) {
  const std::optional<double> value = python_float(text);
  check(value.has_value(), "argument ", flag, ": invalid float value: ", py_repr(text));
  return *value;
}

Field int_field(std::string_view name, int64_t Args::*m) {
  return {name, false, [=](Args& a, const json::Value& v) { a.*m = json_int(name, v); },
          [=](Args& a, std::string_view t, const std::string& flag) { a.*m = text_int(t, flag); },
          [=](const Args& a) { return json::Value(a.*m); }};
}

Field optional_int_field(std::string_view name, std::optional<int64_t> Args::*m) {
  return {name, false,
          [=](Args& a, const json::Value& v) {
            a.*m = v.is_null() ? std::nullopt : std::optional<int64_t>(json_int(name, v));
          },
          [=](Args& a, std::string_view t, const std::string& flag) { a.*m = text_int(t, flag); },
          [=](const Args& a) { return a.*m ? json::Value(*(a.*m)) : json::Value(); }};
}

Field float_field(std::string_view name, double Args::*m) {
  return {name, false, [=](Args& a, const json::Value& v) { a.*m = json_float(name, v); },
          [=](Args& a, std::string_view t, const std::string& flag) { a.*m = text_float(t, flag); },
          [=](const Args& a) { return json::Value(a.*m); }};
}

Field optional_float_field(std::string_view name, std::optional<double> Args::*m) {
  return {name, false,
          [=](Args& a, const json::Value& v) {
            a.*m = v.is_null() ? std::nullopt : std::optional<double>(json_float(name, v));
          },
          [=](Args& a, std::string_view t, const std::string& flag) { a.*m = text_float(t, flag); },
          [=](const Args& a) { return a.*m ? json::Value(*(a.*m)) : json::Value(); }};
}

Field bool_field(std::string_view name, bool Args::*m) {
  return {name, true,
          [=](Args& a, const json::Value& v) {
            if (!v.is_bool()) wrong_json_type(name, "a boolean", v);
            a.*m = v.as_bool();
          },
          [=](Args& a, std::string_view t, const std::string& flag) {
            const std::optional<bool> value = string_to_bool(t);
            check(value.has_value(), "argument ", flag, ": Truthy value expected: got ", t,
                  " but expected one of yes/no, true/false, t/f, y/n, 1/0 (case insensitive).");
            a.*m = *value;
          },
          [=](const Args& a) { return json::Value(a.*m); }};
}

template <typename E>
Field choice_field(std::string_view name, E Args::*m, const ChoiceSet<E>& (*set)()) {
  return {name, false,
          [=](Args& a, const json::Value& v) {
            if (!v.is_string()) wrong_json_type(name, "a string", v);
            a.*m = choose(set(), name, v.as_string(), [&](const std::vector<std::string>& names) {
              return v.as_string() + " is not a valid " + std::string(set().transformers_class) +
                     ", please select one of " + py_list(names);
            });
          },
          [=](Args& a, std::string_view t, const std::string& flag) {
            a.*m = choose(set(), name, t, [&](const std::vector<std::string>& names) {
              std::string choices;
              for (size_t i = 0; i < names.size(); ++i) choices += (i ? ", " : "") + py_repr(names[i]);
              return "argument " + flag + ": invalid choice: " + py_repr(t) + " (choose from " + choices + ")";
            });
          },
          [=](const Args& a) { return json::Value(name_of(set(), a.*m)); }};
}

// The fields in Transformers' declaration order, which to_json keeps.
const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      {"output_dir", false,
       [](Args& a, const json::Value& v) {
         if (v.is_null()) {
           a.output_dir = "trainer_output";
         } else {
           if (!v.is_string()) wrong_json_type("output_dir", "a string", v);
           a.output_dir = v.as_string();
         }
       },
       [](Args& a, std::string_view t, const std::string&) { a.output_dir = t; },
       [](const Args& a) { return json::Value(a.output_dir); }},
      int_field("per_device_train_batch_size", &Args::per_device_train_batch_size),
      float_field("num_train_epochs", &Args::num_train_epochs),
      int_field("max_steps", &Args::max_steps),
      float_field("learning_rate", &Args::learning_rate),
      choice_field("lr_scheduler_type", &Args::lr_scheduler_type, &scheduler_types),
      {"lr_scheduler_kwargs", false,
       [](Args& a, const json::Value& v) {
         a.lr_scheduler_kwargs = v.is_null() ? std::nullopt
                                             : std::optional<json::Object>(read_kwargs(v, "lr_scheduler_kwargs"));
       },
       [](Args& a, std::string_view t, const std::string&) {
         a.lr_scheduler_kwargs = read_kwargs(json::Value(t), "lr_scheduler_kwargs");
       },
       [](const Args& a) { return a.lr_scheduler_kwargs ? json::Value(*a.lr_scheduler_kwargs) : json::Value(); }},
      float_field("warmup_steps", &Args::warmup_steps),
      float_field("weight_decay", &Args::weight_decay),
      float_field("adam_beta1", &Args::adam_beta1),
      float_field("adam_beta2", &Args::adam_beta2),
      float_field("adam_epsilon", &Args::adam_epsilon),
      int_field("gradient_accumulation_steps", &Args::gradient_accumulation_steps),
      float_field("max_grad_norm", &Args::max_grad_norm),
      bool_field("bf16", &Args::bf16),
      bool_field("fp16", &Args::fp16),
      bool_field("gradient_checkpointing", &Args::gradient_checkpointing),
      choice_field("logging_strategy", &Args::logging_strategy, &interval_strategies),
      float_field("logging_steps", &Args::logging_steps),
      bool_field("logging_first_step", &Args::logging_first_step),
      {"report_to", false, [](Args&, const json::Value& v) { check_report_to(v); },
       [](Args&, std::string_view t, const std::string&) { check_report_to(json::Value(t)); },
       [](const Args&) { return json::Value(json::Array{}); }},
      choice_field("eval_strategy", &Args::eval_strategy, &interval_strategies),
      optional_float_field("eval_steps", &Args::eval_steps),
      int_field("per_device_eval_batch_size", &Args::per_device_eval_batch_size),
      choice_field("save_strategy", &Args::save_strategy, &save_strategies),
      float_field("save_steps", &Args::save_steps),
      optional_int_field("save_total_limit", &Args::save_total_limit),
      int_field("seed", &Args::seed),
      optional_int_field("data_seed", &Args::data_seed),
      bool_field("use_cpu", &Args::use_cpu),
      bool_field("dataloader_drop_last", &Args::dataloader_drop_last),
      {"resume_from_checkpoint", false,
       [](Args& a, const json::Value& v) {
         if (v.is_null()) {
           a.resume_from_checkpoint = std::nullopt;
         } else {
           if (!v.is_string()) wrong_json_type("resume_from_checkpoint", "a string", v);
           a.resume_from_checkpoint = v.as_string();
         }
       },
       [](Args& a, std::string_view t, const std::string&) { a.resume_from_checkpoint = std::string(t); },
       [](const Args& a) { return a.resume_from_checkpoint ? json::Value(*a.resume_from_checkpoint) : json::Value(); }},
  };
  return table;
}

const Field* find_field(std::string_view name) {
  for (const Field& f : fields()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// The field of a command-line flag: --name, or --name-with-dashes as HfArgumentParser also registers.
const Field* find_flag(std::string_view flag) {
  if (flag.rfind("--", 0) != 0) return nullptr;
  std::string name(flag.substr(2));
  for (const Field& f : fields()) {
    std::string dashed(f.name);
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    if (name == f.name || name == dashed) return &f;
  }
  return nullptr;
}

// argparse names an option by all its spellings: "--learning_rate/--learning-rate".
std::string flag_label(const Field& f) {
  std::string label = "--" + std::string(f.name);
  if (f.name.find('_') != std::string_view::npos) {
    std::string dashed(f.name);
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    label += "/--" + dashed;
  }
  return label;
}

void apply_json(Args& args, const json::Value& value) {
  check(value.is_object(), "training arguments must be a JSON object, found ", json_type(value));
  std::vector<std::string> unused;
  for (const auto& [key, v] : value.as_object()) {
    if (const Field* f = find_field(key)) {
      f->from_json(args, v);
    } else {
      unused.push_back(key);
    }
  }
  std::sort(unused.begin(), unused.end());
  check(unused.empty(), "Some keys are not used by the HfArgumentParser: ", py_list(unused));
}

void apply_tokens(Args& args, const std::vector<std::string>& tokens) {
  std::vector<std::string> unused;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& token = tokens[i];
    const size_t eq = token.find('=');
    const std::string_view flag = std::string_view(token).substr(0, eq);
    const Field* f = token.rfind("--", 0) == 0 ? find_flag(flag) : nullptr;
    if (!f) {
      unused.push_back(token);
      continue;
    }
    std::string text;
    if (eq != std::string::npos) {
      text = token.substr(eq + 1);
    } else if (i + 1 < tokens.size() && !looks_like_option(tokens[i + 1])) {
      text = tokens[++i];
    } else {
      check(f->is_bool, "argument ", flag_label(*f), ": expected one argument");
      text = "true";
    }
    f->from_text(args, text, flag_label(*f));
  }
  check(unused.empty(), "Some specified arguments are not used by the HfArgumentParser: ", py_list(unused));
}

// os.path.expanduser for "~" and "~/...", from $HOME.
std::string expand_user(const std::string& path) {
  if (path.empty() || path[0] != '~' || (path.size() > 1 && path[1] != '/')) return path;
  const char* home = std::getenv("HOME");
  if (!home) return path;
  std::string out = home;
  if (out.size() > 1 && out.back() == '/' && path.size() > 1) out.pop_back();
  return out + path.substr(1);
}

// _validate_args: a step interval above 1 must be whole.
void check_whole_steps(double& steps, std::string_view flag) {
  if (steps > 1) {
    check(steps == std::trunc(steps), "--", flag, " must be an integer if bigger than 1: ", py_float(steps));
  }
}

}  // namespace

std::string_view to_string(IntervalStrategy strategy) {
  return name_of(interval_strategies(), strategy);
}

std::string_view to_string(SchedulerType type) {
  return name_of(scheduler_types(), type);
}

TrainingArguments TrainingArguments::parse(const std::vector<std::string>& tokens,
                                           const std::optional<std::string>& config_path) {
  TrainingArguments args;
  if (config_path) {
    try {
      apply_json(args, json::parse_file(*config_path));
    } catch (const Error& e) {
      throw_error(*config_path, ": ", e.what());
    }
  }
  apply_tokens(args, tokens);
  args.validate();
  return args;
}

TrainingArguments TrainingArguments::from_json(const json::Value& value) {
  TrainingArguments args;
  apply_json(args, value);
  args.validate();
  return args;
}

void TrainingArguments::validate() {
  output_dir = expand_user(output_dir);

  // Transformers formats its enums as "IntervalStrategy.STEPS" in these messages.
  if (eval_strategy == IntervalStrategy::steps && (!eval_steps || *eval_steps == 0)) {
    check(logging_steps > 0,
          "evaluation strategy IntervalStrategy.STEPS requires either non-zero --eval_steps or --logging_steps");
    eval_steps = logging_steps;
  }
  if (logging_strategy == IntervalStrategy::steps) {
    check(logging_steps != 0, "logging strategy IntervalStrategy.STEPS requires non-zero --logging_steps");
    check_whole_steps(logging_steps, "logging_steps");
  }
  if (eval_strategy == IntervalStrategy::steps) check_whole_steps(*eval_steps, "eval_steps");
  if (save_strategy == IntervalStrategy::steps) check_whole_steps(save_steps, "save_steps");

  check(!(fp16 && bf16), "At most one of fp16 and bf16 can be True, but not both");
  check(!(warmup_steps < 0), "warmup_steps must be an integer or a float");

  // Transformers leaves these to torch, which refuses them when the DataLoader and AdamW are built; tfm
  // refuses them here with torch's messages, before a model is loaded.
  check(per_device_train_batch_size > 0,
        "batch_size should be a positive integer value, but got batch_size=", per_device_train_batch_size);
  check(per_device_eval_batch_size > 0,
        "batch_size should be a positive integer value, but got batch_size=", per_device_eval_batch_size);
  check(gradient_accumulation_steps > 0, "gradient_accumulation_steps must be a positive integer, but got ",
        gradient_accumulation_steps);
  check(0.0 <= learning_rate, "Invalid learning rate: ", py_float(learning_rate));
  check(0.0 <= adam_epsilon, "Invalid epsilon value: ", py_float(adam_epsilon));
  check(0.0 <= adam_beta1 && adam_beta1 < 1.0, "Invalid beta parameter at index 0: ", py_float(adam_beta1));
  check(0.0 <= adam_beta2 && adam_beta2 < 1.0, "Invalid beta parameter at index 1: ", py_float(adam_beta2));
  check(0.0 <= weight_decay, "Invalid weight_decay value: ", py_float(weight_decay));
}

int64_t TrainingArguments::get_warmup_steps(int64_t num_training_steps) const {
  if (warmup_steps >= 1) return static_cast<int64_t>(warmup_steps);
  return static_cast<int64_t>(std::ceil(static_cast<double>(num_training_steps) * warmup_steps));
}

json::Value TrainingArguments::to_json() const {
  json::Object out;
  for (const Field& f : fields()) out.emplace_back(std::string(f.name), f.to_json(*this));
  return json::Value(std::move(out));
}

}  // namespace tfm

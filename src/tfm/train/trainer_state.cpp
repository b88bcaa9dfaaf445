#include "tfm/train/trainer_state.h"

#include <cmath>
#include <functional>

#include "tfm/core/error.h"
#include "tfm/io/file.h"

namespace tfm {
namespace {

using State = TrainerState;

// One field: read from the file's value (errors name `source` and the field) and written back.
struct Field {
  const char* name;
  std::function<void(State&, const json::Value&, const std::string& source)> read;
  std::function<json::Value(const State&)> write;
};

[[noreturn]] void wrong_type(const std::string& source, const char* name, const char* expected,
                             const json::Value& v) {
  throw_error(source, ": `", name, "` must be ", expected, ", found ", json::Value::type_name(v.type()));
}

int64_t read_int(const json::Value& v, const std::string& source, const char* name) {
  if (!v.is_int()) wrong_type(source, name, "an integer", v);
  return v.as_int();
}
double read_number(const json::Value& v, const std::string& source, const char* name) {
  if (!v.is_number()) wrong_type(source, name, "a number", v);
  return v.as_double();
}

Field int_field(const char* name, int64_t State::*m) {
  return {name, [=](State& s, const json::Value& v, const std::string& src) { s.*m = read_int(v, src, name); },
          [=](const State& s) { return json::Value(s.*m); }};
}
Field optional_int_field(const char* name, std::optional<int64_t> State::*m) {
  return {name,
          [=](State& s, const json::Value& v, const std::string& src) {
            s.*m = v.is_null() ? std::nullopt : std::optional<int64_t>(read_int(v, src, name));
          },
          [=](const State& s) { return s.*m ? json::Value(*(s.*m)) : json::Value(); }};
}
Field number_field(const char* name, double State::*m) {
  return {name, [=](State& s, const json::Value& v, const std::string& src) { s.*m = read_number(v, src, name); },
          [=](const State& s) { return json::Value(s.*m); }};
}
Field optional_number_field(const char* name, std::optional<double> State::*m) {
  return {name,
          [=](State& s, const json::Value& v, const std::string& src) {
            s.*m = v.is_null() ? std::nullopt : std::optional<double>(read_number(v, src, name));
          },
          [=](const State& s) { return s.*m ? json::Value(*(s.*m)) : json::Value(); }};
}
Field bool_field(const char* name, bool State::*m) {
  return {name,
          [=](State& s, const json::Value& v, const std::string& src) {
            if (!v.is_bool()) wrong_type(src, name, "a boolean", v);
            s.*m = v.as_bool();
          },
          [=](const State& s) { return json::Value(s.*m); }};
}
Field optional_string_field(const char* name, std::optional<std::string> State::*m) {
  return {name,
          [=](State& s, const json::Value& v, const std::string& src) {
            if (v.is_null()) {
              s.*m = std::nullopt;
              return;
            }
            if (!v.is_string()) wrong_type(src, name, "a string", v);
            s.*m = v.as_string();
          },
          [=](const State& s) { return s.*m ? json::Value(*(s.*m)) : json::Value(); }};
}

// TrainerState's fields in declaration order (dataclasses.asdict's).
const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      number_field("epoch", &State::epoch),
      int_field("global_step", &State::global_step),
      int_field("max_steps", &State::max_steps),
      int_field("logging_steps", &State::logging_steps),
      int_field("eval_steps", &State::eval_steps),
      int_field("save_steps", &State::save_steps),
      optional_int_field("train_batch_size", &State::train_batch_size),
      int_field("num_train_epochs", &State::num_train_epochs),
      int_field("num_input_tokens_seen", &State::num_input_tokens_seen),
      number_field("total_flos", &State::total_flos),
      {"log_history",
       [](State& s, const json::Value& v, const std::string& src) {
         if (!v.is_array()) wrong_type(src, "log_history", "a list", v);
         s.log_history.clear();
         for (size_t i = 0; i < v.as_array().size(); ++i) {
           const json::Value& entry = v[i];
           check(entry.is_object(), src, ": `log_history[", i, "]` must be an object, found ",
                 json::Value::type_name(entry.type()));
           s.log_history.push_back(entry.as_object());
         }
       },
       [](const State& s) {
         json::Array entries;
         for (const json::Object& entry : s.log_history) entries.emplace_back(entry);
         return json::Value(std::move(entries));
       }},
      optional_number_field("best_metric", &State::best_metric),
      optional_int_field("best_global_step", &State::best_global_step),
      optional_string_field("best_model_checkpoint", &State::best_model_checkpoint),
      bool_field("is_local_process_zero", &State::is_local_process_zero),
      bool_field("is_world_process_zero", &State::is_world_process_zero),
      bool_field("is_hyper_param_search", &State::is_hyper_param_search),
      optional_string_field("trial_name", &State::trial_name),
      {"trial_params",
       [](State& s, const json::Value& v, const std::string& src) {
         if (!v.is_null() && !v.is_object()) wrong_type(src, "trial_params", "null or an object", v);
         s.trial_params = v;
       },
       [](const State& s) { return s.trial_params; }},
      {"stateful_callbacks",
       [](State& s, const json::Value& v, const std::string& src) {
         // None is what a state built without callbacks holds before __post_init__ makes it {}.
         if (v.is_null()) {
           s.stateful_callbacks.clear();
           return;
         }
         if (!v.is_object()) wrong_type(src, "stateful_callbacks", "an object", v);
         s.stateful_callbacks = v.as_object();
       },
       [](const State& s) { return json::Value(s.stateful_callbacks); }},
  };
  return table;
}

}  // namespace

void TrainerState::compute_steps(const TrainingArguments& args, int64_t max_steps) {
  const auto resolve = [&](double steps) {
    return steps < 1 ? static_cast<int64_t>(std::ceil(static_cast<double>(max_steps) * steps))
                     : static_cast<int64_t>(steps);
  };
  logging_steps = resolve(args.logging_steps);
  if (args.eval_steps) eval_steps = resolve(*args.eval_steps);
  save_steps = resolve(args.save_steps);
}

json::Value TrainerState::to_json() const {
  json::Object out;
  for (const Field& f : fields()) out.emplace_back(f.name, f.write(*this));
  return json::Value(std::move(out));
}

TrainerState TrainerState::from_json(const json::Value& value, const std::string& source) {
  check(value.is_object(), source, ": must be a JSON object, found ", json::Value::type_name(value.type()));
  TrainerState state;
  for (const auto& [key, v] : value.as_object()) {
    const Field* field = nullptr;
    for (const Field& f : fields()) {
      if (key == f.name) field = &f;
    }
    check(field != nullptr, source, ": unknown field `", key,
          "` (TrainerState.__init__() got an unexpected keyword argument '", key, "')");
    field->read(state, v, source);
  }
  return state;
}

void TrainerState::save_to_json(const std::string& path) const {
  json::DumpOptions options;
  options.indent = 2;
  options.sort_keys = true;
  options.item_separator = ",";
  options.ensure_ascii = true;  // json.dumps's default
  io::write_file_atomically(path, json::dump(to_json(), options) + "\n");
}

TrainerState TrainerState::load_from_json(const std::string& path) {
  return from_json(json::parse_file(path), path);
}

}  // namespace tfm

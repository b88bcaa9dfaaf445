#include "tfm/server/openai_request.h"

#include <cmath>
#include <utility>

#include "tfm/core/error.h"

namespace tfm::server {
namespace {

// The error messages follow OpenAI's wording, so that clients that show them read as they do against OpenAI.
[[noreturn]] void wrong_type(const std::string& param, std::string_view expected, const json::Value& got) {
  throw ApiError(400,
                 "Invalid type for '" + param + "': expected " + std::string(expected) + ", but got " +
                     std::string(json::Value::type_name(got.type())) + " instead.",
                 "invalid_request_error", param, "invalid_type");
}

[[noreturn]] void invalid_value(const std::string& param, const std::string& why) {
  throw ApiError(400, "Invalid '" + param + "': " + why, "invalid_request_error", param, "invalid_value");
}

// A whole number as an integer ("2", not "2.0"), as far as int64_t holds it: a client may send any double.
std::string number_text(double x) {
  return std::fabs(x) < 0x1p63 && x == std::trunc(x) ? std::to_string(static_cast<int64_t>(x))
                                                     : json::python_float_repr(x);
}

// The members of one JSON object, read by name. Every member a request may have is asked for; whatever is
// left (and not null, which clients send for "not given") is an argument this server does not know.
class Fields {
 public:
  Fields(const json::Object& object, std::string prefix)
      : object_(object), prefix_(std::move(prefix)), used_(object.size(), false) {}

  std::string param(std::string_view name) const { return prefix_ + std::string(name); }

  // The member, or nullptr when it is absent or null; of a name given more than once, the last, as Python's
  // json module (and so OpenAI's and vLLM's servers) reads it.
  const json::Value* find(std::string_view name) {
    const json::Value* found = nullptr;
    for (size_t i = 0; i < object_.size(); ++i) {
      if (object_[i].first != name) continue;
      used_[i] = true;
      found = &object_[i].second;
    }
    return found && !found->is_null() ? found : nullptr;
  }

  const json::Value& required(std::string_view name) {
    const json::Value* v = find(name);
    if (!v) {
      throw ApiError(400, "Missing required parameter: '" + param(name) + "'.", "invalid_request_error",
                     param(name), "missing_required_parameter");
    }
    return *v;
  }

  std::optional<bool> boolean(std::string_view name) {
    const json::Value* v = find(name);
    if (!v) return std::nullopt;
    if (!v->is_bool()) wrong_type(param(name), "a boolean", *v);
    return v->as_bool();
  }

  std::optional<std::string> string(std::string_view name) {
    const json::Value* v = find(name);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong_type(param(name), "a string", *v);
    return v->as_string();
  }

  std::optional<int64_t> integer(std::string_view name, int64_t min, int64_t max) {
    const json::Value* v = find(name);
    if (!v) return std::nullopt;
    if (!v->is_int()) wrong_type(param(name), "an integer", *v);
    const int64_t x = v->as_int();
    if (x < min)
      invalid_value(param(name), "expected a value >= " + std::to_string(min) + ", but got " +
                                     std::to_string(x) + " instead.");
    if (x > max)
      invalid_value(param(name), "expected a value <= " + std::to_string(max) + ", but got " +
                                     std::to_string(x) + " instead.");
    return x;
  }

  std::optional<double> number(std::string_view name, double min, double max) {
    const json::Value* v = find(name);
    if (!v) return std::nullopt;
    if (!v->is_number()) wrong_type(param(name), "a number", *v);
    const double x = v->as_double();
    if (!(x >= min))
      invalid_value(param(name),
                    "expected a value >= " + number_text(min) + ", but got " + number_text(x) + " instead.");
    if (!(x <= max))
      invalid_value(param(name),
                    "expected a value <= " + number_text(max) + ", but got " + number_text(x) + " instead.");
    return x;
  }

  void reject_unknown() const {
    for (size_t i = 0; i < object_.size(); ++i) {
      if (used_[i] || object_[i].second.is_null()) continue;
      throw ApiError(400, "Unrecognized request argument supplied: " + param(object_[i].first),
                     "invalid_request_error", param(object_[i].first), "unrecognized_argument");
    }
  }

 private:
  const json::Object& object_;
  std::string prefix_;
  std::vector<bool> used_;
};

const json::Object& as_object(const json::Value& v, const std::string& param) {
  if (!v.is_object()) wrong_type(param, "an object", v);
  return v.as_object();
}

const json::Array& as_array(const json::Value& v, const std::string& param) {
  if (!v.is_array()) wrong_type(param, "an array", v);
  return v.as_array();
}

std::vector<int64_t> token_ids(const json::Array& items, const std::string& param) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!items[i].is_int()) wrong_type(p, "an integer", items[i]);
    if (items[i].as_int() < 0) invalid_value(p, "token ids must not be negative.");
    ids.push_back(items[i].as_int());
  }
  return ids;
}

// A string, a list of strings, a list of token ids, or a list of lists of token ids.
std::vector<Prompt> read_prompts(const json::Value& prompt) {
  if (prompt.is_string()) return {prompt.as_string()};
  const json::Array& items = as_array(prompt, "prompt");
  if (items.empty()) invalid_value("prompt", "the list of prompts is empty.");
  if (items[0].is_int()) return {token_ids(items, "prompt")};
  std::vector<Prompt> prompts;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string p = "prompt[" + std::to_string(i) + "]";
    if (items[i].is_string() && items[0].is_string()) {
      prompts.emplace_back(items[i].as_string());
    } else if (items[i].is_array() && items[0].is_array()) {
      prompts.emplace_back(token_ids(items[i].as_array(), p));
    } else {
      wrong_type(p, items[0].is_string() ? "a string" : "an array of token ids", items[i]);
    }
  }
  return prompts;
}

// Text content as one string: a list of text parts is joined with newlines, as chat templates that expect a
// string need it.
json::Value message_content(const json::Value& content, const std::string& param) {
  if (content.is_string()) return content;
  if (!content.is_array()) wrong_type(param, "a string or an array of content parts", content);
  std::string text;
  const json::Array& parts = content.as_array();
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    Fields part(as_object(parts[i], p), p + ".");
    const std::string type = part.string("type").value_or("");
    if (type != "text") {
      throw ApiError(400,
                     "Content parts of type '" + type + "' are not supported: this server takes text only.",
                     "invalid_request_error", p + ".type", "invalid_value");
    }
    if (i > 0) text += "\n";
    const json::Value& t = part.required("text");
    if (!t.is_string()) wrong_type(p + ".text", "a string", t);
    text += t.as_string();
    part.reject_unknown();
  }
  return text;
}

json::Value read_messages(const json::Value& value) {
  const json::Array& messages = as_array(value, "messages");
  if (messages.empty()) invalid_value("messages", "expected a non-empty array of messages.");
  json::Array out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    json::Value message = as_object(messages[i], p);
    const json::Value* role = message.find("role");
    if (!role) {
      throw ApiError(400, "Missing required parameter: '" + p + ".role'.", "invalid_request_error",
                     p + ".role", "missing_required_parameter");
    }
    if (!role->is_string()) wrong_type(p + ".role", "a string", *role);
    // Other members (name, tool_calls, ...) go to the chat template as they are.
    if (const json::Value* content = message.find("content"); content && !content->is_null()) {
      message.set("content", message_content(*content, p + ".content"));
    }
    out.push_back(std::move(message));
  }
  return out;
}

std::vector<std::string> read_stop(const json::Value& stop) {
  std::vector<std::string> out;
  if (stop.is_string()) {
    out.push_back(stop.as_string());
  } else {
    const json::Array& items = as_array(stop, "stop");
    if (items.size() > 4)
      invalid_value("stop",
                    "expected at most 4 stop sequences, but got " + std::to_string(items.size()) + ".");
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) wrong_type("stop[" + std::to_string(i) + "]", "a string", items[i]);
      out.push_back(items[i].as_string());
    }
  }
  for (const std::string& s : out) {
    if (s.empty()) invalid_value("stop", "stop sequences must not be empty.");
  }
  return out;
}

}  // namespace

CompletionRequest parse_completion_request(Endpoint endpoint, std::string_view body) {
  json::Value parsed;
  try {
    parsed = json::parse(body);
  } catch (const Error& e) {
    throw ApiError(400, std::string("We could not parse the JSON body of your request: ") + e.what());
  }
  if (!parsed.is_object()) {
    throw ApiError(400, "The request body must be a JSON object, but got " +
                            std::string(json::Value::type_name(parsed.type())) + ".");
  }
  Fields fields(parsed.as_object(), "");
  CompletionRequest r;
  r.endpoint = endpoint;
  const bool chat = endpoint == Endpoint::chat_completions;
  r.model = fields.string("model");
  if (chat) {
    r.messages = read_messages(fields.required("messages"));
  } else {
    r.prompts = read_prompts(fields.required("prompt"));
  }
  r.stream = fields.boolean("stream").value_or(false);
  if (const json::Value* options = fields.find("stream_options")) {
    if (!r.stream) {
      throw ApiError(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                     "invalid_request_error", "stream_options", "invalid_value");
    }
    Fields stream_options(as_object(*options, "stream_options"), "stream_options.");
    r.include_usage = stream_options.boolean("include_usage").value_or(false);
    stream_options.reject_unknown();
  }
  r.n = fields.integer("n", 1, 128).value_or(1);
  if (const json::Value* stop = fields.find("stop")) r.stop = read_stop(*stop);
  const std::optional<int64_t> max_tokens = fields.integer("max_tokens", 1, INT32_MAX);
  r.max_tokens = chat ? fields.integer("max_completion_tokens", 1, INT32_MAX) : std::nullopt;
  if (!r.max_tokens) r.max_tokens = max_tokens;
  r.temperature = fields.number("temperature", 0, 2);
  r.top_p = fields.number("top_p", 0, 1);
  r.seed = fields.integer("seed", INT64_MIN, INT64_MAX);
  r.presence_penalty = fields.number("presence_penalty", -2, 2).value_or(0);
  r.frequency_penalty = fields.number("frequency_penalty", -2, 2).value_or(0);
  if (chat) {
    const bool logprobs = fields.boolean("logprobs").value_or(false);
    const std::optional<int64_t> top = fields.integer("top_logprobs", 0, 20);
    if (top && !logprobs) {
      throw ApiError(400, "Invalid 'top_logprobs': 'logprobs' must be true when 'top_logprobs' is given.",
                     "invalid_request_error", "top_logprobs", "invalid_value");
    }
    if (logprobs) r.top_logprobs = top.value_or(0);
  } else {
    r.top_logprobs = fields.integer("logprobs", 0, 20);
  }
  r.ignore_eos = fields.boolean("ignore_eos").value_or(false);
  fields.string("user");  // an end-user id for abuse monitoring: accepted, not used
  fields.reject_unknown();
  return r;
}

}  // namespace tfm::server

#include "tfm/jinja/value.h"

#include <algorithm>
#include <cmath>

#include "tfm/core/error.h"

namespace tfm::jinja {

Value::Value() {
  static const auto plain = std::make_shared<const UndefinedData>();
  v_ = plain;
}

Value::Value(std::vector<Value> items, bool tuple)
    : v_(std::make_shared<ListData>(ListData{std::move(items), tuple})) {}

Value Value::undefined(std::string message) {
  Value v;
  v.v_ = std::make_shared<const UndefinedData>(UndefinedData{std::move(message)});
  return v;
}

Value Value::callable(std::string name, Function function) {
  Value v;
  v.v_ = std::make_shared<const CallableData>(CallableData{std::move(name), std::move(function)});
  return v;
}

Value make_dict(std::vector<std::pair<Value, Value>> items, bool is_namespace) {
  return Value(std::make_shared<DictData>(DictData{std::move(items), is_namespace}));
}

Value Value::from_json(const json::Value& j) {
  switch (j.type()) {
    case json::Value::Type::null:
      return nullptr;
    case json::Value::Type::boolean:
      return j.as_bool();
    case json::Value::Type::integer:
      return j.as_int();
    case json::Value::Type::number:
      return j.as_double();
    case json::Value::Type::string:
      return j.as_string();
    case json::Value::Type::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j.as_array()) items.push_back(from_json(e));
      return Value(std::move(items));
    }
    case json::Value::Type::object: {
      std::vector<std::pair<Value, Value>> items;
      items.reserve(j.size());
      for (const auto& [k, v] : j.as_object()) items.emplace_back(Value(k), from_json(v));
      return make_dict(std::move(items));
    }
  }
  return nullptr;
}

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void DictData::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

void Value::fail_undefined() const {
  const std::string& m = undefined_message();
  throw Error(m.empty() ? "'Undefined' is undefined" : m);
}

int64_t Value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  return std::get<int64_t>(v_);
}

double Value::as_double() const {
  if (is_float()) return std::get<double>(v_);
  return static_cast<double>(as_int());
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::undefined:
    case Kind::none:
      return false;
    case Kind::boolean:
      return as_bool();
    case Kind::integer:
      return as_int() != 0;
    case Kind::floating:
      return as_double() != 0.0;
    case Kind::string:
      return !as_string().empty();
    case Kind::list:
      return !items().empty();
    case Kind::dict:
      return dict().is_namespace || !dict().items.empty();
    case Kind::callable:
      return true;
  }
  return false;
}

std::string python_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

std::vector<std::string> utf8_chars(std::string_view s) {
  std::vector<std::string> chars;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    const auto u = static_cast<unsigned char>(s[i]);
    if (u >= 0xf0)
      n = 4;
    else if (u >= 0xe0)
      n = 3;
    else if (u >= 0xc0)
      n = 2;
    n = std::min(n, s.size() - i);
    chars.emplace_back(s.substr(i, n));
    i += n;
  }
  return chars;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

std::string Value::str() const {
  switch (kind()) {
    case Kind::undefined:
      return "";
    case Kind::string:
      return as_string();
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::undefined:
      return "Undefined";
    case Kind::none:
      return "None";
    case Kind::boolean:
      return as_bool() ? "True" : "False";
    case Kind::integer:
      return std::to_string(as_int());
    case Kind::floating:
      return json::python_float_repr(as_double());
    case Kind::string:
      return python_repr(as_string());
    case Kind::list: {
      const bool tuple = is_tuple();
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < items().size(); ++i) {
        if (i) out += ", ";
        out += items()[i].repr();
      }
      if (tuple && items().size() == 1) out += ",";
      out += tuple ? ")" : "]";
      return out;
    }
    case Kind::dict: {
      std::string out = dict().is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict().items) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      out += dict().is_namespace ? "}>" : "}";
      return out;
    }
    case Kind::callable:
      return "<function " + callable_data().name + ">";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::undefined:
      return "Undefined";
    case Kind::none:
      return "NoneType";
    case Kind::boolean:
      return "bool";
    case Kind::integer:
      return "int";
    case Kind::floating:
      return "float";
    case Kind::string:
      return "str";
    case Kind::list:
      return is_tuple() ? "tuple" : "list";
    case Kind::dict:
      return dict().is_namespace ? "Namespace" : "dict";
    case Kind::callable:
      return "function";
  }
  return "object";
}

json::Value Value::to_json() const {
  switch (kind()) {
    case Kind::none:
      return nullptr;
    case Kind::boolean:
      return as_bool();
    case Kind::integer:
      return as_int();
    case Kind::floating:
      return as_double();
    case Kind::string:
      return as_string();
    case Kind::list: {
      json::Array a;
      for (const auto& e : items()) a.push_back(e.to_json());
      return a;
    }
    case Kind::dict:
      if (!dict().is_namespace) {
        json::Value o = json::Object{};
        for (const auto& [k, v] : dict().items) {
          // json.dumps turns int, float, bool and None keys into strings; it rejects other keys.
          std::string key;
          if (k.is_string())
            key = k.as_string();
          else if (k.is_bool())
            key = k.as_bool() ? "true" : "false";
          else if (k.is_none())
            key = "null";
          else if (k.is_int() || k.is_float())
            key = k.str();
          else
            throw_error("keys must be str, int, float, bool or None, not ", k.type_name());
          o.set(std::move(key), v.to_json());
        }
        return o;
      }
      [[fallthrough]];
    default:
      throw_error("Object of type ", type_name(), " is not JSON serializable");
  }
}

std::vector<Value> Value::iterate() const {
  switch (kind()) {
    case Kind::undefined:
      return {};
    case Kind::string: {
      std::vector<Value> out;
      for (auto& c : utf8_chars(as_string())) out.emplace_back(std::move(c));
      return out;
    }
    case Kind::list:
      return items();
    case Kind::dict: {
      if (dict().is_namespace) break;
      std::vector<Value> out;
      for (const auto& kv : dict().items) out.push_back(kv.first);
      return out;
    }
    default:
      break;
  }
  throw_error("'", type_name(), "' object is not iterable");
}

bool Value::operator==(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (is_float() || other.is_float()) return as_double() == other.as_double();
    return as_int() == other.as_int();
  }
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case Kind::undefined:
    case Kind::none:
      return true;
    case Kind::string:
      return as_string() == other.as_string();
    case Kind::list:
      return is_tuple() == other.is_tuple() && items() == other.items();
    case Kind::dict: {
      if (dict().is_namespace || other.dict().is_namespace) return &dict() == &other.dict();
      if (dict().items.size() != other.dict().items.size()) return false;
      for (const auto& [k, v] : dict().items) {
        const Value* o = other.dict().find(k);
        if (!o || !(*o == v)) return false;
      }
      return true;
    }
    case Kind::callable:
      return &callable_data() == &other.callable_data();
    default:
      return false;
  }
}

bool Value::less(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (is_float() || other.is_float()) return as_double() < other.as_double();
    return as_int() < other.as_int();
  }
  if (is_string() && other.is_string()) return as_string() < other.as_string();
  if (is_list() && other.is_list() && is_tuple() == other.is_tuple()) {
    const auto &a = items(), &b = other.items();
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (a[i] == b[i]) continue;
      return a[i].less(b[i]);
    }
    return a.size() < b.size();
  }
  if (is_undefined() || other.is_undefined()) (is_undefined() ? *this : other).fail_undefined();
  throw_error("'<' not supported between instances of '", type_name(), "' and '", other.type_name(), "'");
}

}  // namespace tfm::jinja

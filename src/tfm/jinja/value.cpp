#include "tfm/jinja/value.h"

#include <algorithm>
#include <cmath>

#include "tfm/core/error.h"

namespace tfm::jinja {

Value Args::get(size_t i, std::string_view name, Value fallback) const {
  if (i < positional.size()) return positional[i];
  for (const auto& [k, v] : keyword)
    if (k == name) return v;
  return fallback;
}

Value Args::get(size_t i, std::string_view name) const {
  return get(i, name, Value());
}

Value::Value() {
  static const auto plain = std::make_shared<const UndefinedData>();
  v_ = plain;
}

namespace {

int nesting_over(int inner) {
  if (inner >= kMaxNesting) throw_error("a value is nested more than ", kMaxNesting, " levels deep");
  return inner + 1;
}

}  // namespace

Value::Value(std::vector<Value> items, bool tuple) {
  int inner = 0;
  for (const auto& v : items) inner = std::max(inner, v.nesting());
  v_ = std::make_shared<ListData>(ListData{std::move(items), tuple, nesting_over(inner)});
}

int Value::nesting() const {
  if (is_list()) return std::get<std::shared_ptr<ListData>>(v_)->nesting;
  if (is_dict()) return dict().nesting;
  return 0;
}

Value Value::undefined(std::string message) {
  Value v;
  v.v_ = std::make_shared<const UndefinedData>(UndefinedData{std::move(message)});
  return v;
}

Value Value::callable(std::string name, Function function, std::shared_ptr<const DictData> attributes) {
  Value v;
  v.v_ = std::make_shared<const CallableData>(
      CallableData{std::move(name), std::move(function), std::move(attributes)});
  return v;
}

Value make_dict(std::vector<std::pair<Value, Value>> items, bool is_namespace) {
  int inner = 0;
  for (const auto& [k, v] : items) inner = std::max({inner, k.nesting(), v.nesting()});
  return Value(std::make_shared<DictData>(DictData{std::move(items), is_namespace, nesting_over(inner)}));
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
  nesting = std::max(nesting, nesting_over(std::max(key.nesting(), value.nesting())));
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

void Value::wrong_type(const char* expected) const {
  if (is_undefined()) fail_undefined();
  throw_error("expected ", expected, ", got ", type_name());
}

int64_t Value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  return get<int64_t>("int");
}

double Value::as_double() const {
  if (is_float()) return std::get<double>(v_);
  if (!is_number()) wrong_type("a number");
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

namespace {

// Walks over nested values count what they visit: a template can build lists that contain themselves many
// times over (each `l = [l, l]` doubles the work), so printing, comparing and serializing are bounded.
constexpr size_t kMaxNodes = 4'000'000;
constexpr int kMaxDepth = 512;
constexpr size_t kMaxReprBytes = size_t{64} << 20;

class Walk {
 public:
  struct Level {
    Walk& w;
    explicit Level(Walk& walk) : w(walk) {
      if (++w.nodes_ > kMaxNodes)
        throw_error("a value is too large to handle (over ", kMaxNodes, " elements)");
      if (++w.depth_ > kMaxDepth) throw_error("a value is nested more than ", kMaxDepth, " levels deep");
    }
    ~Level() { --w.depth_; }
  };

 private:
  size_t nodes_ = 0;
  int depth_ = 0;
};

void repr_into(const Value& v, std::string& out, Walk& walk) {
  const Walk::Level level(walk);
  if (out.size() > kMaxReprBytes) throw_error("a value's text is over ", kMaxReprBytes, " bytes");
  if (v.is_list()) {
    const bool tuple = v.is_tuple();
    out += tuple ? "(" : "[";
    for (size_t i = 0; i < v.items().size(); ++i) {
      if (i) out += ", ";
      repr_into(v.items()[i], out, walk);
    }
    if (tuple && v.items().size() == 1) out += ",";
    out += tuple ? ")" : "]";
  } else if (v.is_dict()) {
    out += v.is_namespace() ? "<Namespace {" : "{";
    bool first = true;
    for (const auto& [k, x] : v.dict().items) {
      if (!first) out += ", ";
      first = false;
      repr_into(k, out, walk);
      out += ": ";
      repr_into(x, out, walk);
    }
    out += v.is_namespace() ? "}>" : "}";
  } else {
    out += v.repr();
  }
}

bool equal(const Value& a, const Value& b, Walk& walk) {
  const Walk::Level level(walk);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none:
      return true;
    case Value::Kind::string:
      return a.as_string() == b.as_string();
    case Value::Kind::list: {
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!equal(a.items()[i], b.items()[i], walk)) return false;
      return true;
    }
    case Value::Kind::dict: {
      if (a.is_namespace() || b.is_namespace()) return &a.dict() == &b.dict();
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* o = b.dict().find(k);
        if (!o || !equal(*o, v, walk)) return false;
      }
      return true;
    }
    case Value::Kind::callable:
      return &a.callable_data() == &b.callable_data();
    default:
      return false;
  }
}

bool less_than(const Value& a, const Value& b, Walk& walk) {
  const Walk::Level level(walk);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equal(x[i], y[i], walk)) continue;
      return less_than(x[i], y[i], walk);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined()) (a.is_undefined() ? a : b).fail_undefined();
  throw_error("'<' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

json::Value to_json_walk(const Value& v, Walk& walk) {
  const Walk::Level level(walk);
  switch (v.kind()) {
    case Value::Kind::none:
      return nullptr;
    case Value::Kind::boolean:
      return v.as_bool();
    case Value::Kind::integer:
      return v.as_int();
    case Value::Kind::floating:
      return v.as_double();
    case Value::Kind::string:
      return v.as_string();
    case Value::Kind::list: {
      json::Array a;
      for (const auto& e : v.items()) a.push_back(to_json_walk(e, walk));
      return a;
    }
    case Value::Kind::dict:
      if (!v.is_namespace()) {
        json::Value o = json::Object{};
        for (const auto& [k, x] : v.dict().items) {
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
          o.set(std::move(key), to_json_walk(x, walk));
        }
        return o;
      }
      [[fallthrough]];
    default:
      throw_error("Object of type ", v.type_name(), " is not JSON serializable");
  }
}

}  // namespace

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
    case Kind::list:
    case Kind::dict: {
      std::string out;
      Walk walk;
      repr_into(*this, out, walk);
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
  Walk walk;
  return to_json_walk(*this, walk);
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
  Walk walk;
  return equal(*this, other, walk);
}

bool Value::less(const Value& other) const {
  Walk walk;
  return less_than(*this, other, walk);
}

}  // namespace tfm::jinja

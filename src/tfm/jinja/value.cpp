#include "tfm/jinja/value.h"

#include <algorithm>
#include <cmath>

#include "tfm/core/error.h"
#include "tfm/core/stack.h"
#include "tfm/jinja/context.h"

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

Value Value::named_tuple(std::vector<Value> items, const std::vector<std::string>& fields) {
  Value v(std::move(items), true);
  std::get<std::shared_ptr<ListData>>(v.v_)->fields = &fields;
  return v;
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

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

size_t utf8_offset(std::string_view s, size_t index) {
  size_t i = 0;
  for (; index > 0 && i < s.size(); --index) i = utf8_next(s, i);
  return i;
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
// times over (each `l = [l, l]` doubles the work), so printing, comparing and serializing are bounded, each
// walk by itself and all of a render's walks together (through its Context's work count).
constexpr size_t kMaxNodes = 4'000'000;
constexpr int kMaxDepth = 512;
constexpr size_t kNodeWork = 64;  // the bytes of work one element visited counts as

class Walk {
 public:
  Walk() : context_(Context::active()) {}
  struct Level {
    Walk& w;
    explicit Level(Walk& walk) : w(walk) {
      if (++w.nodes_ > kMaxNodes)
        throw_error("a value is too large to handle (over ", kMaxNodes, " elements)");
      if (++w.depth_ > kMaxDepth) throw_error("a value is nested more than ", kMaxDepth, " levels deep");
      // A walk is leaf work below a template's own nesting: it needs room only for itself and an error.
      if (!stack_space_left(size_t{256} << 10))
        throw_error("a value is nested more than ", w.depth_ - 1,
                    " levels deep, as deep as the stack allows");
      w.work(kNodeWork);
    }
    ~Level() { --w.depth_; }
  };
  void work(size_t bytes) {
    if (context_) context_->work(bytes);
  }
  // Text written is checked as it grows (and before `more` bytes are added), so that no piece of it is built
  // beyond the render's value limit.
  void check_text(const std::string& out, size_t more = 0) const {
    const size_t max = context_ ? context_->limits.max_output_bytes : Limits{}.max_output_bytes;
    if (out.size() > max || more > max - out.size()) throw_error("a value's text is over ", max, " bytes");
  }

 private:
  Context* context_;
  size_t nodes_ = 0;
  int depth_ = 0;
};

void repr_string(std::string_view s, std::string& out, Walk& walk) {
  walk.work(s.size());
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
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
      continue;
    }
    walk.check_text(out);
  }
  out += quote;
  walk.check_text(out);
}

void repr_into(const Value& v, std::string& out, Walk& walk) {
  const Walk::Level level(walk);
  walk.check_text(out);
  if (v.is_string()) {
    repr_string(v.as_string(), out, walk);
  } else if (v.is_list()) {
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
      if (a.as_string().size() != b.as_string().size()) return false;
      walk.work(a.as_string().size());
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
  if (a.is_string() && b.is_string()) {
    walk.work(std::min(a.as_string().size(), b.as_string().size()));
    return a.as_string() < b.as_string();
  }
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

// json.dumps's string escaping: only '"', '\\' and control characters, or with ensure_ascii everything past
// '~' as \uXXXX (UTF-16 surrogate pairs above the BMP).
void json_string(std::string_view s, bool ensure_ascii, std::string& out, Walk& walk) {
  walk.work(s.size());
  static const char* hex = "0123456789abcdef";
  auto escape16 = [&](uint32_t u) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += hex[(u >> shift) & 0xf];
  };
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const char* short_escape = c == '"'    ? "\\\""
                               : c == '\\' ? "\\\\"
                               : c == '\n' ? "\\n"
                               : c == '\r' ? "\\r"
                               : c == '\t' ? "\\t"
                               : c == '\b' ? "\\b"
                               : c == '\f' ? "\\f"
                                           : nullptr;
    const size_t next = utf8_next(s, i);
    if (short_escape) {
      out += short_escape;
    } else if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
      escape16(c);
    } else if (c < 0x80 || !ensure_ascii) {
      out.append(s.substr(i, next - i));
    } else {
      const size_t len = next - i;
      uint32_t cp = len >= 4 ? c & 0x07 : len == 3 ? c & 0x0f : len == 2 ? c & 0x1f : c;
      for (size_t k = i + 1; k < next; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[k]) & 0x3f);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        escape16(0xd800 + ((cp >> 10) & 0x3ff));
        escape16(0xdc00 + (cp & 0x3ff));
      } else {
        escape16(cp);
      }
    }
    i = next;
    walk.check_text(out);
  }
  out += '"';
}

std::string json_key(const Value& k) {
  // json.dumps turns int, float, bool and None keys into strings; it rejects other keys.
  if (k.is_string()) return k.as_string();
  if (k.is_bool()) return k.as_bool() ? "true" : "false";
  if (k.is_none()) return "null";
  if (k.is_int() || k.is_float()) return k.repr();
  throw_error("keys must be str, int, float, bool or None, not ", k.type_name());
}

struct JsonFormat {
  const JsonOptions& options;
  bool indent;                   // newlines, and this before each item per level:
  std::string_view indent_text;  // a string,
  size_t indent_spaces;          // else spaces
  std::string_view item_separator;
};

void json_into(const Value& v, const JsonFormat& f, int level, std::string& out, Walk& walk) {
  const Walk::Level guard(walk);
  const JsonOptions& o = f.options;
  walk.check_text(out);
  auto newline = [&](int lvl) {
    if (!f.indent) return;
    out += '\n';
    size_t bytes = 0;  // checked before it is written: an indent of 10**12 spaces is a number
    if (__builtin_mul_overflow(std::max(f.indent_text.size(), f.indent_spaces), static_cast<size_t>(lvl),
                               &bytes))
      bytes = SIZE_MAX - out.size();
    walk.check_text(out, bytes);
    for (int i = 0; i < lvl; ++i) {
      out += f.indent_text;
      out.append(f.indent_spaces, ' ');
    }
  };
  switch (v.kind()) {
    case Value::Kind::none:
      out += "null";
      return;
    case Value::Kind::boolean:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::integer:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::floating: {
      const double d = v.as_double();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : v.repr();
      return;
    }
    case Value::Kind::string:
      json_string(v.as_string(), o.ensure_ascii, out, walk);
      return;
    case Value::Kind::list: {
      const auto& items = v.items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += f.item_separator;
        newline(level + 1);
        json_into(items[i], f, level + 1, out, walk);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Kind::dict: {
      if (v.is_namespace()) break;
      const auto& items = v.dict().items;
      if (items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<Value, Value>*> members;
      for (const auto& kv : items) members.push_back(&kv);
      // Python sorts the original keys (mixed types raise), then converts them.
      if (o.sort_keys)
        std::stable_sort(members.begin(), members.end(),
                         [&](const auto* x, const auto* y) { return less_than(x->first, y->first, walk); });
      out += '{';
      for (size_t i = 0; i < members.size(); ++i) {
        if (i) out += f.item_separator;
        newline(level + 1);
        json_string(json_key(members[i]->first), o.ensure_ascii, out, walk);
        out += o.key_separator;
        json_into(members[i]->second, f, level + 1, out, walk);
      }
      newline(level);
      out += '}';
      return;
    }
    default:
      break;
  }
  if (v.is_undefined()) v.fail_undefined();
  throw_error("Object of type ", v.type_name(), " is not JSON serializable");
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

std::string dump_json(const Value& value, const JsonOptions& options) {
  JsonFormat f{options, !options.indent.is_none() && !options.indent.is_undefined(), "", 0, ", "};
  if (options.indent.is_string()) {
    f.indent_text = options.indent.as_string();
  } else if (f.indent) {
    if (!options.indent.is_number() || options.indent.is_float())
      throw_error("can't multiply sequence by non-int of type '", options.indent.type_name(), "'");
    f.indent_spaces = static_cast<size_t>(std::max<int64_t>(options.indent.as_int(), 0));
  }
  if (f.indent) f.item_separator = ",";
  if (options.item_separator) f.item_separator = *options.item_separator;
  std::string out;
  Walk walk;
  json_into(value, f, 0, out, walk);
  return out;
}

std::vector<Value> Value::iterate() const {
  switch (kind()) {
    case Kind::undefined:
      return {};
    case Kind::string: {
      const std::string& s = as_string();
      std::vector<Value> out;
      for (size_t i = 0; i < s.size();) {
        const size_t next = utf8_next(s, i);
        out.emplace_back(std::string_view(s).substr(i, next - i));
        i = next;
      }
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

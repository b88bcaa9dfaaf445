#include "tfm/io/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "tfm/core/error.h"
#include "tfm/io/file.h"

namespace tfm::json {

std::string_view Value::type_name(Type t) {
  switch (t) {
    case Type::null:
      return "null";
    case Type::boolean:
      return "a boolean";
    case Type::integer:
      return "an integer";
    case Type::number:
      return "a number";
    case Type::string:
      return "a string";
    case Type::array:
      return "an array";
    case Type::object:
      return "an object";
  }
  return "?";
}

namespace {
[[noreturn]] void wrong_type(std::string_view expected, Value::Type found) {
  throw_error("expected ", expected, ", found ", Value::type_name(found));
}
}  // namespace

bool Value::as_bool() const {
  if (!is_bool()) wrong_type("a boolean", type());
  return std::get<bool>(v_);
}
int64_t Value::as_int() const {
  if (!is_int()) wrong_type("an integer", type());
  return std::get<int64_t>(v_);
}
double Value::as_double() const {
  if (is_int()) return static_cast<double>(std::get<int64_t>(v_));
  if (!is_float()) wrong_type("a number", type());
  return std::get<double>(v_);
}
const std::string& Value::as_string() const {
  if (!is_string()) wrong_type("a string", type());
  return std::get<std::string>(v_);
}
const Array& Value::as_array() const {
  if (!is_array()) wrong_type("an array", type());
  return std::get<Array>(v_);
}
Array& Value::as_array() {
  if (!is_array()) wrong_type("an array", type());
  return std::get<Array>(v_);
}
const Object& Value::as_object() const {
  if (!is_object()) wrong_type("an object", type());
  return std::get<Object>(v_);
}
Object& Value::as_object() {
  if (!is_object()) wrong_type("an object", type());
  return std::get<Object>(v_);
}

const Value* Value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& [k, v] : std::get<Object>(v_)) {
    if (k == key) return &v;
  }
  return nullptr;
}
Value* Value::find(std::string_view key) {
  return const_cast<Value*>(std::as_const(*this).find(key));
}

const Value& Value::at(std::string_view key) const {
  const Value* v = find(key);
  if (!v) throw_error(is_object() ? "missing key '" : "expected an object holding '", key, "'");
  return *v;
}

void Value::set(std::string key, Value value) {
  if (is_null()) v_ = Object{};
  if (Value* existing = find(key)) {
    *existing = std::move(value);
  } else {
    as_object().emplace_back(std::move(key), std::move(value));
  }
}

size_t Value::size() const {
  switch (type()) {
    case Type::array:
      return std::get<Array>(v_).size();
    case Type::object:
      return std::get<Object>(v_).size();
    case Type::string:
      return std::get<std::string>(v_).size();
    default:
      wrong_type("an array, object or string", type());
  }
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

Value parse_file(const std::string& path) {
  const std::string text = io::read_file(path);
  try {
    return parse(text);
  } catch (const Error& e) {
    throw_error(path, ": ", e.what());
  }
}

// ---------------------------------------------------------------------------------------------------------
// Writer.

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(r.ptr - buf));  // "-1.2345e+02"
  const size_t e = sci.find('e');
  std::string digits;
  bool negative = false;
  for (char c : sci.substr(0, e)) {
    if (c == '-') negative = true;
    if (c >= '0' && c <= '9') digits += c;
  }
  int exponent = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+'), sci.data() + sci.size(), exponent);
  const int decpt = exponent + 1;  // value = 0.DIGITS * 10^decpt
  std::string out = negative ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int x = decpt - 1;
    out += x < 0 ? "e-" : "e+";
    const std::string mag = std::to_string(std::abs(x));
    out += (mag.size() < 2 ? "0" : "") + mag;
  }
  return out;
}

namespace {

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    auto escape16 = [&](uint32_t u) {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += hex[(u >> shift) & 0xf];
    };
    if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
      escape16(c);
    } else if (c < 0x80 || !ensure_ascii) {
      out += static_cast<char>(c);
    } else {
      // Decode one UTF-8 sequence and write it as \uXXXX (a surrogate pair above the BMP).
      const int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
      uint32_t cp = len == 4 ? c & 0x07 : len == 3 ? c & 0x0f : len == 2 ? c & 0x1f : c;
      for (int k = 1; k < len && i + 1 < s.size(); ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(s[++i]) & 0x3f);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        escape16(0xd800 + (cp >> 10));
        escape16(0xdc00 + (cp & 0x3ff));
      } else {
        escape16(cp);
      }
    }
  }
  out += '"';
}

void dump_value(std::string& out, const Value& v, const DumpOptions& o, int level) {
  auto newline = [&](int lvl) {
    if (o.indent >= 0) {
      out += '\n';
      out.append(static_cast<size_t>(o.indent * lvl), ' ');
    }
  };
  switch (v.type()) {
    case Value::Type::null:
      out += "null";
      return;
    case Value::Type::boolean:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Type::integer:
      out += std::to_string(v.as_int());
      return;
    case Value::Type::number: {
      const double d = v.as_double();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                             : python_float_repr(d);
      return;
    }
    case Value::Type::string:
      dump_string(out, v.as_string(), o.ensure_ascii);
      return;
    case Value::Type::array: {
      const Array& a = v.as_array();
      if (a.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += o.item_separator;
        newline(level + 1);
        dump_value(out, a[i], o, level + 1);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Type::object: {
      const Object& obj = v.as_object();
      if (obj.empty()) {
        out += "{}";
        return;
      }
      std::vector<const Member*> members;
      for (const auto& m : obj) members.push_back(&m);
      if (o.sort_keys) {
        std::stable_sort(members.begin(), members.end(),
                         [](const Member* a, const Member* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t i = 0; i < members.size(); ++i) {
        if (i) out += o.item_separator;
        newline(level + 1);
        dump_string(out, members[i]->first, o.ensure_ascii);
        out += o.key_separator;
        dump_value(out, members[i]->second, o, level + 1);
      }
      newline(level);
      out += '}';
      return;
    }
  }
}

}  // namespace

std::string dump(const Value& value, const DumpOptions& options) {
  std::string out;
  dump_value(out, value, options, 0);
  return out;
}

std::string dump_compact(const Value& value) {
  DumpOptions o;
  o.item_separator = ",";
  o.key_separator = ":";
  return dump(value, o);
}

}  // namespace tfm::json

#include "tfm/io/json.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tfm/core/error.h"

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

// ---------------------------------------------------------------------------------------------------------
// Parser: recursive descent over the text, with a depth limit so hostile input cannot exhaust the stack.

namespace {

constexpr int kMaxDepth = 512;

class Parser {
 public:
  explicit Parser(std::string_view text)
      : p_(text.data()), begin_(text.data()), end_(text.data() + text.size()) {}

  Value document() {
    skip_space();
    Value v = value(0);
    skip_space();
    if (p_ != end_) fail("unexpected data after the JSON value");
    return v;
  }

 private:
  const char* p_;
  const char* begin_;
  const char* end_;

  [[noreturn]] void fail(std::string_view what) {
    int line = 1, column = 1;
    for (const char* c = begin_; c < p_ && c < end_; ++c) {
      if (*c == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw_error("JSON parse error at line ", line, " column ", column, ": ", what);
  }

  void skip_space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  void expect_literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0) {
      fail("invalid literal");
    }
    p_ += word.size();
  }

  Value value(int depth) {
    if (p_ >= end_) fail("unexpected end of input");
    switch (*p_) {
      case '{':
        return object(depth + 1);
      case '[':
        return array(depth + 1);
      case '"':
        return Value(string());
      case 't':
        expect_literal("true");
        return Value(true);
      case 'f':
        expect_literal("false");
        return Value(false);
      case 'n':
        expect_literal("null");
        return Value();
      case 'N':
        expect_literal("NaN");
        return Value(std::nan(""));  // Python's json accepts these
      case 'I':
        expect_literal("Infinity");
        return Value(INFINITY);
      default:
        return number();
    }
  }

  Value object(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    ++p_;
    Object members;
    skip_space();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return Value(std::move(members));
    }
    while (true) {
      skip_space();
      if (p_ >= end_ || *p_ != '"') fail("expected a string key");
      std::string key = string();
      skip_space();
      if (p_ >= end_ || *p_ != ':') fail("expected ':'");
      ++p_;
      skip_space();
      Value v = value(depth);
      add_member(members, std::move(key), std::move(v));
      skip_space();
      if (p_ < end_ && *p_ == ',') {
        ++p_;
        continue;
      }
      if (p_ < end_ && *p_ == '}') {
        ++p_;
        merge_duplicates(members);
        return Value(std::move(members));
      }
      fail("expected ',' or '}'");
    }
  }

  // Python's json keeps the last value of a duplicated key, at the place of the first. Small objects check
  // as they go; large ones (a tokenizer's vocabulary) are checked once at the end through a hash table.
  static constexpr size_t kLinear = 16;

  static void add_member(Object& members, std::string key, Value v) {
    if (members.size() < kLinear) {
      for (auto& m : members) {
        if (m.first == key) {
          m.second = std::move(v);
          return;
        }
      }
    }
    members.emplace_back(std::move(key), std::move(v));
  }

  static void merge_duplicates(Object& members) {
    if (members.size() <= kLinear) return;
    const size_t capacity = std::bit_ceil(members.size() * 2);
    std::vector<uint32_t> slots(capacity, UINT32_MAX);
    std::vector<bool> dropped(members.size(), false);
    bool any = false;
    for (size_t i = 0; i < members.size(); ++i) {
      size_t slot = std::hash<std::string_view>{}(members[i].first) & (capacity - 1);
      while (slots[slot] != UINT32_MAX && members[slots[slot]].first != members[i].first) {
        slot = (slot + 1) & (capacity - 1);
      }
      if (slots[slot] == UINT32_MAX) {
        slots[slot] = static_cast<uint32_t>(i);
      } else {
        members[slots[slot]].second = std::move(members[i].second);
        dropped[i] = any = true;
      }
    }
    if (!any) return;
    size_t kept = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      if (dropped[i]) continue;
      if (kept != i) members[kept] = std::move(members[i]);
      ++kept;
    }
    members.resize(kept);
  }

  Value array(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    ++p_;
    Array items;
    skip_space();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return Value(std::move(items));
    }
    while (true) {
      skip_space();
      items.push_back(value(depth));
      skip_space();
      if (p_ < end_ && *p_ == ',') {
        ++p_;
        continue;
      }
      if (p_ < end_ && *p_ == ']') {
        ++p_;
        return Value(std::move(items));
      }
      fail("expected ',' or ']'");
    }
  }

  uint32_t hex4() {
    if (end_ - p_ < 4) fail("truncated \\u escape");
    uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = *p_++;
      cp <<= 4;
      if (c >= '0' && c <= '9') {
        cp |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        cp |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        cp |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        fail("invalid \\u escape");
      }
    }
    return cp;
  }

  std::string string() {
    ++p_;  // opening quote
    std::string out;
    while (true) {
      const char* run = p_;
      while (p_ < end_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20) ++p_;
      out.append(run, p_);
      if (p_ >= end_) fail("unterminated string");
      const char c = *p_++;
      if (c == '"') return out;
      if (c != '\\') fail("control character in string");
      if (p_ >= end_) fail("unterminated string");
      switch (*p_++) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xd800 && cp < 0xdc00 && end_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u') {
            const char* save = p_;
            p_ += 2;
            const uint32_t low = hex4();
            if (low >= 0xdc00 && low < 0xe000) {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            } else {
              p_ = save;
            }
          }
          append_utf8(out, cp);  // a lone surrogate is kept as its 3-byte form, as Python keeps it in a str
          break;
        }
        default:
          fail("invalid escape in string");
      }
    }
  }

  Value number() {
    const char* start = p_;
    bool is_float = false;
    if (p_ < end_ && *p_ == '-') {
      ++p_;
      if (p_ < end_ && *p_ == 'I') {
        expect_literal("Infinity");
        return Value(-INFINITY);
      }
    }
    if (p_ >= end_ || !(*p_ >= '0' && *p_ <= '9')) fail("invalid value");
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && *p_ == '.') {
      is_float = true;
      ++p_;
      if (p_ >= end_ || !(*p_ >= '0' && *p_ <= '9')) fail("invalid number");
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      is_float = true;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ >= end_ || !(*p_ >= '0' && *p_ <= '9')) fail("invalid number");
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (!is_float) {
      int64_t i = 0;
      const auto [ptr, ec] = std::from_chars(start, p_, i);
      if (ec == std::errc() && ptr == p_) return Value(i);
    }
    double d = 0;
    const auto [ptr, ec] = std::from_chars(start, p_, d);
    if (ptr != p_ || (ec != std::errc() && ec != std::errc::result_out_of_range)) fail("invalid number");
    return Value(d);
  }
};

}  // namespace

Value parse(std::string_view text) {
  return Parser(text).document();
}

Value parse_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open ", path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  try {
    return parse(buffer.str());
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

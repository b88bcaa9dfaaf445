// JSON values with objects kept in insertion order (as Python dicts are), a fast parser for large files such
// as tokenizer.json, and a writer that formats exactly like Python's json.dumps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tfm::json {

class Value;
using Array = std::vector<Value>;
using Member = std::pair<std::string, Value>;
using Object = std::vector<Member>;

class Value {
 public:
  enum class Type : uint8_t { null, boolean, integer, number, string, array, object };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(static_cast<int64_t>(i)) {}
  Value(int64_t i) : v_(i) {}
  Value(uint64_t i) : v_(static_cast<int64_t>(i)) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(Array a) : v_(std::move(a)) {}
  Value(Object o) : v_(std::move(o)) {}

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_null() const { return type() == Type::null; }
  bool is_bool() const { return type() == Type::boolean; }
  bool is_int() const { return type() == Type::integer; }
  bool is_number() const { return type() == Type::integer || type() == Type::number; }  // int or float
  bool is_float() const { return type() == Type::number; }
  bool is_string() const { return type() == Type::string; }
  bool is_array() const { return type() == Type::array; }
  bool is_object() const { return type() == Type::object; }

  // Typed access; a wrong type throws tfm::Error ("expected a string, found an array").
  bool as_bool() const;
  int64_t as_int() const;    // integers only
  double as_double() const;  // integers or floats
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Object members. find returns nullptr when the key is absent (or this is not an object).
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  const Value& at(std::string_view key) const;  // throws naming the key when absent
  void set(std::string key, Value value);       // replaces an existing member or appends
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  // Array elements, or the number of members / elements / bytes of a string.
  const Value& operator[](size_t i) const { return as_array()[i]; }
  size_t size() const;

  bool operator==(const Value& other) const { return v_ == other.v_; }

  static std::string_view type_name(Type t);

 private:
  std::variant<std::monostate, bool, int64_t, double, std::string, Array, Object> v_;
};

// Parses one JSON document (surrounding whitespace allowed). Errors name the line and column.
Value parse(std::string_view text);
// Reads and parses a file; errors name the file.
Value parse_file(const std::string& path);

struct DumpOptions {
  int indent = -1;  // < 0: one line; >= 0: newline and this many spaces per level (as json.dumps(indent=n))
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_separator = ", ";  // json.dumps's separators; with indent, Python uses "," by default
  std::string key_separator = ": ";
};
// Formats as Python's json.dumps(value, **options) would, floats in Python's repr.
std::string dump(const Value& value, const DumpOptions& options = {});
// The compact form: no spaces.
std::string dump_compact(const Value& value);

// Python's repr() of a float: "1.0", "1e-05", "1.5e+16", "inf", "nan".
std::string python_float_repr(double d);
// Appends the code point as UTF-8.
void append_utf8(std::string& out, uint32_t code_point);

}  // namespace tfm::json

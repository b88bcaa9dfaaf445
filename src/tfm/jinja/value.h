// The values a template computes with: Python's data model as far as Jinja2 templates see it (None, bool,
// int, float, str, list, tuple, dict), plus Jinja's own kinds (undefined, callables, namespaces).
// Containers are shared, as Python objects are; only namespaces are mutated after creation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tfm/io/json.h"

namespace tfm::jinja {

class Value;
class Context;

// Positional and keyword arguments of a call, in the order written.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The argument at position i or with keyword `name` (as Python binds them), else the fallback.
  Value get(size_t i, std::string_view name, Value fallback) const;
  Value get(size_t i, std::string_view name) const;  // undefined when absent
};

using Function = std::function<Value(Context&, Args&)>;

// Containers know how deeply they nest (at most kMaxNesting), so that no walk over a value, its destruction
// included, can exhaust the stack.
constexpr int kMaxNesting = 600;

struct ListData {
  std::vector<Value> items;
  bool tuple = false;
  int nesting = 1;
  const std::vector<std::string>* fields = nullptr;  // a named tuple's field names (static), its attributes
};
struct DictData {
  std::vector<std::pair<Value, Value>> items;  // insertion order, as Python dicts
  bool is_namespace = false;                   // a namespace() object: attributes may be assigned
  int nesting = 1;
  const Value* find(const Value& key) const;
  void set(Value key, Value value);
};
struct UndefinedData {
  std::string message;  // what using it reports: "'x' is undefined"
};
struct CallableData {
  std::string name;
  Function function;
  std::shared_ptr<const DictData> attributes;  // a callable with attributes: the `loop` of a for loop
};

class Value {
 public:
  enum class Kind : uint8_t { undefined, none, boolean, integer, floating, string, list, dict, callable };

  Value();  // undefined, with no name
  Value(std::nullptr_t) : v_(std::monostate{}) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(static_cast<int64_t>(i)) {}
  Value(int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::vector<Value> items, bool tuple = false);
  Value(std::shared_ptr<DictData> dict) : v_(std::move(dict)) {}

  static Value named_tuple(std::vector<Value> items, const std::vector<std::string>& fields);
  static Value undefined(std::string message);
  static Value callable(std::string name, Function function,
                        std::shared_ptr<const DictData> attributes = nullptr);
  static Value from_json(const json::Value& j);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::undefined; }
  bool is_none() const { return kind() == Kind::none; }
  bool is_bool() const { return kind() == Kind::boolean; }
  bool is_int() const { return kind() == Kind::integer; }
  bool is_float() const { return kind() == Kind::floating; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python: bool is an int
  bool is_string() const { return kind() == Kind::string; }
  bool is_list() const { return kind() == Kind::list; }  // lists and tuples
  bool is_tuple() const { return is_list() && std::get<std::shared_ptr<ListData>>(v_)->tuple; }
  const std::vector<std::string>* fields() const { return get<std::shared_ptr<ListData>>("list")->fields; }
  bool is_dict() const { return kind() == Kind::dict; }  // dicts and namespaces
  bool is_namespace() const { return is_dict() && dict().is_namespace; }
  bool is_callable() const { return kind() == Kind::callable; }
  int nesting() const;  // 0 for scalars, 1 for a flat list or dict
  bool is_iterable() const { return is_string() || is_list() || is_dict() || is_undefined(); }

  // Typed access; the wrong type throws tfm::Error ("expected str, got int").
  bool as_bool() const { return get<bool>("bool"); }
  int64_t as_int() const;    // ints and bools
  double as_double() const;  // ints, bools and floats
  const std::string& as_string() const { return get<std::string>("str"); }
  const std::vector<Value>& items() const { return get<std::shared_ptr<ListData>>("list")->items; }
  const DictData& dict() const { return *get<std::shared_ptr<DictData>>("dict"); }
  DictData& mutable_dict() const { return *get<std::shared_ptr<DictData>>("dict"); }
  const CallableData& callable_data() const { return *get<std::shared_ptr<const CallableData>>("function"); }
  const std::string& undefined_message() const {
    return get<std::shared_ptr<const UndefinedData>>("undefined")->message;
  }
  // Throws the error an undefined value gives when it is used (called, indexed, added...).
  [[noreturn]] void fail_undefined() const;

  bool truthy() const;                        // Python's bool()
  std::string str() const;                    // Python's str(); undefined gives ""
  std::string repr() const;                   // Python's repr()
  std::string type_name() const;              // Python's type name: "str", "dict", "NoneType"
  std::vector<Value> iterate() const;         // for loops: characters, items, dict keys
  bool operator==(const Value& other) const;  // Python's ==
  // Python's <; throws "'<' not supported between instances of ..." for unordered types.
  bool less(const Value& other) const;

 private:
  template <typename T>
  const T& get(const char* expected) const {
    if (const T* p = std::get_if<T>(&v_)) return *p;
    wrong_type(expected);
  }
  [[noreturn]] void wrong_type(const char* expected) const;

  std::variant<std::shared_ptr<const UndefinedData>, std::monostate, bool, int64_t, double, std::string,
               std::shared_ptr<ListData>, std::shared_ptr<DictData>, std::shared_ptr<const CallableData>>
      v_;
};

Value make_dict(std::vector<std::pair<Value, Value>> items = {}, bool is_namespace = false);

// Python's json.dumps options, as the tojson filters pass them.
struct JsonOptions {
  Value indent;  // None (one line), a number of spaces per level (none when negative), or a string
  std::optional<std::string> item_separator;  // absent: ", ", or "," with an indent
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// json.dumps(value, **options); throws on what json.dumps rejects (undefined, callables, namespaces).
std::string dump_json(const Value& value, const JsonOptions& options);

// UTF-8 text counted in code points, as Python's str counts. A code point starts at every byte that is not a
// continuation byte, so text that is not UTF-8 still splits consistently.
size_t utf8_length(std::string_view s);
inline size_t utf8_next(std::string_view s, size_t i) {  // the end of the code point starting at i
  do ++i;
  while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xc0) == 0x80);
  return i;
}
inline size_t utf8_prev(std::string_view s, size_t i) {  // the start of the code point ending at i > 0
  do --i;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xc0) == 0x80);
  return i;
}
// The byte offset of code point `index` (at most s.size()).
size_t utf8_offset(std::string_view s, size_t index);

}  // namespace tfm::jinja

#include "tfm/jinja/builtins.h"

#include <cmath>
#include <limits>
#include <set>

#include "tfm/core/error.h"
#include "tfm/jinja/strings.h"

namespace tfm::jinja {
namespace {

[[noreturn]] void int_overflow() {
  throw_error("integer overflow: tfm's integers have 64 bits, Python's are unbounded");
}

}  // namespace

int64_t int_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) int_overflow();
  return r;
}

int64_t int_sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) int_overflow();
  return r;
}

int64_t int_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) int_overflow();
  return r;
}

int64_t int_floordiv(int64_t a, int64_t b) {
  if (b == 0) throw_error("integer division or modulo by zero");
  if (b == -1) return int_sub(0, a);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t int_mod(int64_t a, int64_t b) {
  if (b == 0) throw_error("integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

int64_t int_pow(int64_t base, int64_t exponent) {
  // Squaring: |base| >= 2 squared past 64 bits means the result is past them too.
  int64_t r = 1;
  while (exponent > 0) {
    if (exponent & 1) r = int_mul(r, base);
    exponent >>= 1;
    if (exponent) base = int_mul(base, base);
  }
  return r;
}

int64_t int_from_double(double d) {
  if (std::isnan(d)) throw_error("cannot convert float NaN to integer");
  if (std::isinf(d)) throw_error("cannot convert float infinity to integer");
  if (d >= 0x1p63 || d < -0x1p63) int_overflow();
  return static_cast<int64_t>(d);
}

int64_t int_arg(const Value& v, int64_t fallback) {
  if (v.is_undefined() || v.is_none()) return fallback;
  if (!v.is_number() || v.is_float())
    throw_error("'", v.type_name(), "' object cannot be interpreted as an integer");
  return v.as_int();
}

namespace {

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  throw_error("unsupported operand type(s) for ", op, ": '", a.type_name(), "' and '", b.type_name(), "'");
}

Value repeat(Context& ctx, const Value& seq, int64_t n) {
  const bool is_str = seq.is_string();
  const size_t count = n > 0 ? static_cast<size_t>(n) : 0;
  const size_t unit = is_str ? seq.as_string().size() : seq.items().size() * sizeof(Value);
  size_t bytes = 0;
  if (__builtin_mul_overflow(unit, count, &bytes)) bytes = SIZE_MAX;
  ctx.build(bytes);
  if (unit == 0) return is_str ? Value("") : Value(std::vector<Value>{}, seq.is_tuple());
  if (is_str) {
    std::string out;
    out.reserve(bytes);
    for (size_t i = 0; i < count; ++i) out += seq.as_string();
    return out;
  }
  std::vector<Value> out;
  out.reserve(count * seq.items().size());
  for (size_t i = 0; i < count; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value(std::move(out), seq.is_tuple());
}

double floor_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

void require_defined(const Value& v) {
  if (v.is_undefined()) v.fail_undefined();
}

}  // namespace

Value binary_op(Context& ctx, std::string_view op, const Value& a, const Value& b) {
  require_defined(a);
  require_defined(b);
  const bool numbers = a.is_number() && b.is_number();
  const bool ints = numbers && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) return int_add(a.as_int(), b.as_int());
    if (numbers) return a.as_double() + b.as_double();
    if (a.is_string() && b.is_string()) {
      ctx.build(a.as_string().size() + b.as_string().size());
      return a.as_string() + b.as_string();
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      ctx.build((a.items().size() + b.items().size()) * sizeof(Value));
      std::vector<Value> out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value(std::move(out), a.is_tuple());
    }
    if (a.is_string()) throw_error("can only concatenate str (not \"", b.type_name(), "\") to str");
    if (a.is_list()) throw_error("can only concatenate list (not \"", b.type_name(), "\") to list");
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) return int_sub(a.as_int(), b.as_int());
    if (numbers) return a.as_double() - b.as_double();
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) return int_mul(a.as_int(), b.as_int());
    if (numbers) return a.as_double() * b.as_double();
    if ((a.is_string() || a.is_list()) && b.is_number() && !b.is_float()) return repeat(ctx, a, b.as_int());
    if ((b.is_string() || b.is_list()) && a.is_number() && !a.is_float()) return repeat(ctx, b, a.as_int());
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!numbers) unsupported("/", a, b);
    if (b.as_double() == 0) throw_error("division by zero");
    return a.as_double() / b.as_double();
  }
  if (op == "//") {
    if (!numbers) unsupported("//", a, b);
    if (ints) return int_floordiv(a.as_int(), b.as_int());
    if (b.as_double() == 0) throw_error("float floor division by zero");
    return std::floor(a.as_double() / b.as_double());
  }
  if (op == "%") {
    if (a.is_string()) return percent_format(ctx, a.as_string(), b);
    if (!numbers) unsupported("%", a, b);
    if (ints) return int_mod(a.as_int(), b.as_int());
    if (b.as_double() == 0) throw_error("float modulo");
    return floor_mod(a.as_double(), b.as_double());
  }
  if (op == "**") {
    if (!numbers) unsupported("** or pow()", a, b);
    if (ints && b.as_int() >= 0) return int_pow(a.as_int(), b.as_int());
    if (a.as_double() == 0 && b.as_double() < 0) throw_error("0.0 cannot be raised to a negative power");
    return std::pow(a.as_double(), b.as_double());
  }
  throw_error("unknown operator ", op);
}

namespace {

// Jinja2's name for an object's type in "has no attribute" messages.
std::string object_name(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_namespace()) return "jinja2.utils.Namespace object";
  return v.type_name() + " object";
}

Value missing_attribute(const Value& obj, const std::string& name) {
  return Value::undefined("'" + object_name(obj) + "' has no attribute '" + name + "'");
}

void check_arity(const Args& a, size_t max, const std::string& name) {
  if (a.positional.size() > max)
    throw_error(name, "() takes at most ", max, " argument", max == 1 ? "" : "s", " (", a.positional.size(),
                " given)");
}

std::string string_arg(const Value& v, const char* what) {
  if (!v.is_string()) throw_error(what, " must be str, not ", v.type_name());
  return v.as_string();
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value(std::move(out));
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    const std::string& x = string_arg(a, prefix ? "startswith first arg" : "endswith first arg");
    return prefix ? s.compare(0, x.size(), x) == 0
                  : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_tuple()) {
    for (const auto& a : affix.items())
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

// The ASCII classes str.isdigit() and friends test, one code point at a time.
Value string_class_test(const std::string& s, const std::string& name) {
  if (s.empty()) return false;
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    const size_t next = utf8_next(s, i);
    const std::string_view c = std::string_view(s).substr(i, next - i);
    i = next;
    const char ch = c.size() == 1 ? c[0] : 0;
    const bool digit = ch >= '0' && ch <= '9', up = ch >= 'A' && ch <= 'Z', low = ch >= 'a' && ch <= 'z';
    if (name == "isupper" || name == "islower") {
      if (name == "isupper" ? low : up) return false;
      cased = cased || up || low;
      continue;
    }
    const bool ok = name == "isspace"   ? pystr::is_space(c)
                    : name == "isalpha" ? up || low
                    : name == "isalnum" ? up || low || digit
                                        : digit;
    if (!ok) return false;
  }
  return name == "isupper" || name == "islower" ? cased : true;
}

Value string_method(Context& ctx, const Value& self, const std::string& name, Args& a) {
  const std::string& s = self.as_string();
  const Value none(nullptr);
  if (name == "startswith" || name == "endswith") {
    check_arity(a, 1, name);
    return affix_match(s, a.get(0, "prefix"), name == "startswith");
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string& x = string_arg(a.get(0, "affix"), name.c_str());
    if (!affix_match(s, x, name == "removeprefix")) return s;
    return name == "removeprefix" ? s.substr(x.size()) : s.substr(0, s.size() - x.size());
  }
  ctx.work(s.size());  // the other methods read the whole string
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    check_arity(a, 1, name);
    return pystr::strip(s, a.get(0, "chars", none), name != "rstrip", name != "lstrip");
  }
  if (name == "split" || name == "rsplit") {
    check_arity(a, 2, name);
    const Value sep = a.get(0, "sep", none);
    const int64_t maxsplit = int_arg(a.get(1, "maxsplit"), -1);
    return string_list(name == "split" ? pystr::split(ctx, s, sep, maxsplit)
                                       : pystr::rsplit(ctx, s, sep, maxsplit));
  }
  if (name == "splitlines")
    return string_list(pystr::splitlines(ctx, s, a.get(0, "keepends", Value(false)).truthy()));
  if (name == "replace") {
    check_arity(a, 3, name);
    return pystr::replace(ctx, s, string_arg(a.get(0, "old"), "replace() argument 1"),
                          string_arg(a.get(1, "new"), "replace() argument 2"),
                          int_arg(a.get(2, "count"), -1));
  }
  if (name == "upper") return pystr::upper(s);
  if (name == "lower" || name == "casefold") return pystr::lower(s);
  if (name == "title") return pystr::title(s);
  if (name == "swapcase") return pystr::swapcase(s);
  if (name == "capitalize") return pystr::capitalize(s);
  if (name == "format") return pystr::format(ctx, s, a);
  if (name == "join") {
    std::string out;
    const auto items = ctx.iterate(a.get(0, "iterable"));
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) ctx.append(out, s);
      ctx.append(out, string_arg(items[i], "sequence item"));
    }
    return out;
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const std::string& x = string_arg(a.get(0, "sub"), "must be str");
    if (name == "count") {
      if (x.empty()) return static_cast<int64_t>(utf8_length(s) + 1);
      int64_t n = 0;
      for (size_t p = pystr::find(s, x); p != std::string::npos; p = pystr::find(s, x, p + x.size())) ++n;
      return n;
    }
    const size_t p = name[0] == 'r' ? pystr::rfind(s, x) : pystr::find(s, x);
    if (p == std::string::npos) {
      if (name == "index" || name == "rindex") throw_error("substring not found");
      return int64_t{-1};
    }
    return static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, p)));
  }
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal" || name == "isalpha" ||
      name == "isalnum" || name == "isspace" || name == "isupper" || name == "islower")
    return string_class_test(s, name);
  if (name == "zfill") return pystr::align(ctx, s, int_arg(a.get(0, "width"), 0), "0", '=');
  if (name == "center" || name == "ljust" || name == "rjust") {
    check_arity(a, 2, name);
    const Value fill = a.get(1, "fillchar", Value(" "));
    return pystr::align(ctx, s, int_arg(a.get(0, "width"), 0), string_arg(fill, name.c_str()),
                        name == "center"  ? '^'
                        : name == "ljust" ? '<'
                                          : '>');
  }
  if (name == "partition" || name == "rpartition") {
    const std::string& x = string_arg(a.get(0, "sep"), name.c_str());
    if (x.empty()) throw_error("empty separator");
    const size_t p = name == "partition" ? pystr::find(s, x) : pystr::rfind(s, x);
    if (p == std::string::npos)
      return name == "partition" ? Value({Value(s), Value(""), Value("")}, true)
                                 : Value({Value(""), Value(""), Value(s)}, true);
    return Value({Value(s.substr(0, p)), Value(x), Value(s.substr(p + x.size()))}, true);
  }
  throw_error("'str' object has no attribute '", name, "'");
}

Value list_method(Context& ctx, const Value& self, const std::string& name, Args& a) {
  const auto& items = self.items();
  if (name == "index" || name == "count") {
    const Value x = a.get(0, "value");
    int64_t n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!(items[i] == x)) continue;
      if (name == "index") return static_cast<int64_t>(i);
      ++n;
    }
    if (name == "index") throw_error(x.repr(), " is not in list");
    return n;
  }
  if (name == "copy") {
    ctx.build(items.size() * sizeof(Value));
    return Value(items);
  }
  throw_error("'", self.type_name(), "' object has no attribute '", name, "'");
}

Value dict_method(Context& ctx, const Value& self, const std::string& name, Args& a) {
  const DictData& d = self.dict();
  if (name == "items" || name == "keys" || name == "values" || name == "copy")
    ctx.build(d.items.size() * 2 * sizeof(Value));
  if (name == "items" || name == "keys" || name == "values") {
    std::vector<Value> out;
    for (const auto& [k, v] : d.items)
      out.push_back(name == "items" ? Value({k, v}, true) : name == "keys" ? k : v);
    return Value(std::move(out));
  }
  if (name == "get") {
    check_arity(a, 2, "get");
    if (a.positional.empty()) throw_error("get expected at least 1 argument, got 0");
    const Value* v = d.find(a.positional[0]);
    return v ? *v : a.positional.size() > 1 ? a.positional[1] : Value(nullptr);
  }
  if (name == "copy") return make_dict(d.items);
  throw_error("'dict' object has no attribute '", name, "'");
}

const std::set<std::string, std::less<>> kStrMethods = {
    "startswith", "endswith",   "strip",     "lstrip",  "rstrip",   "split",        "rsplit",
    "splitlines", "replace",    "upper",     "lower",   "casefold", "title",        "capitalize",
    "format",     "join",       "find",      "rfind",   "index",    "rindex",       "count",
    "isdigit",    "isnumeric",  "isdecimal", "isalpha", "isalnum",  "isspace",      "isupper",
    "islower",    "zfill",      "center",    "ljust",   "rjust",    "removeprefix", "removesuffix",
    "partition",  "rpartition", "swapcase"};
const std::set<std::string, std::less<>> kListMethods = {"index", "count", "copy"};
const std::set<std::string, std::less<>> kListMutators = {"append", "extend",  "insert", "pop",
                                                          "remove", "reverse", "sort",   "clear"};
const std::set<std::string, std::less<>> kDictMethods = {"items", "keys", "values", "get", "copy"};
const std::set<std::string, std::less<>> kDictMutators = {"pop", "popitem", "setdefault", "update", "clear"};

Value bound(const Value& self, const std::string& name,
            Value (*method)(Context&, const Value&, const std::string&, Args&)) {
  return Value::callable(name,
                         [self, name, method](Context& ctx, Args& a) { return method(ctx, self, name, a); });
}

// The code points of s[start:stop:step] as Python computes them: the first index, and how many.
struct SliceRange {
  int64_t first = 0;
  int64_t step = 1;
  size_t count = 0;
};

SliceRange slice_range(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) x = x < -n ? -1 : x + n;  // no overflow for the smallest integer
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = clamp(start, step > 0 ? 0 : n - 1), e = clamp(stop, step > 0 ? n : -1);
  const uint64_t stride = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  const int64_t span = step > 0 ? e - b : b - e;  // both within [-1, n]
  return {b, step, span > 0 ? static_cast<size_t>((static_cast<uint64_t>(span) - 1) / stride + 1) : 0};
}

}  // namespace

Value get_attribute(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::undefined:
      obj.fail_undefined();
    case Value::Kind::string:
      if (kStrMethods.count(name)) return bound(obj, name, string_method);
      break;
    case Value::Kind::list:
      if (const auto* fields = obj.fields())
        for (size_t i = 0; i < fields->size(); ++i)
          if ((*fields)[i] == name) return obj.items()[i];
      if (kListMethods.count(name) && !(obj.is_tuple() && name == "copy"))
        return bound(obj, name, list_method);
      if (!obj.is_tuple() && kListMutators.count(name))
        return Value::undefined("access to attribute '" + name + "' of 'list' object is unsafe.");
      break;
    case Value::Kind::dict:
      if (obj.is_namespace()) {
        if (const Value* v = obj.dict().find(Value(name))) return *v;
        break;
      }
      if (kDictMethods.count(name)) return bound(obj, name, dict_method);
      if (kDictMutators.count(name))
        return Value::undefined("access to attribute '" + name + "' of 'dict' object is unsafe.");
      if (const Value* v = obj.dict().find(Value(name))) return *v;
      break;
    case Value::Kind::callable:
      if (const auto& attributes = obj.callable_data().attributes)
        if (const Value* v = attributes->find(Value(name))) return *v;
      break;
    default:
      break;
  }
  return missing_attribute(obj, name);
}

Value get_item(Context& ctx, const Value& obj, const Value& key) {
  if (obj.is_undefined()) obj.fail_undefined();
  if (obj.is_dict() && !obj.is_namespace()) {
    if (const Value* v = obj.dict().find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && key.is_number() && !key.is_float()) {
    const bool is_str = obj.is_string();
    if (is_str) ctx.work(obj.as_string().size());
    const auto n = static_cast<int64_t>(is_str ? utf8_length(obj.as_string()) : obj.items().size());
    int64_t i = key.as_int();
    if (i < 0 && i >= -n) i += n;
    if (i >= 0 && i < n) {
      const auto k = static_cast<size_t>(i);
      if (!is_str) return obj.items()[k];
      const std::string& s = obj.as_string();
      const size_t p = utf8_offset(s, k);
      return Value(std::string_view(s).substr(p, utf8_next(s, p) - p));
    }
    return Value::undefined("'" + object_name(obj) + "' has no element " + key.repr());
  }
  if (key.is_string()) return get_attribute(obj, key.as_string());
  return Value::undefined("'" + object_name(obj) + "' has no element " + key.repr());
}

Value slice(Context& ctx, const Value& obj, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step) {
  if (obj.is_undefined()) obj.fail_undefined();
  if (!obj.is_string() && !obj.is_list()) throw_error("'", obj.type_name(), "' object is not subscriptable");
  const int64_t st = step.value_or(1);
  if (st == 0) throw_error("slice step cannot be zero");
  if (obj.is_list()) {
    const auto& items = obj.items();
    const SliceRange r = slice_range(static_cast<int64_t>(items.size()), start, stop, st);
    ctx.build(r.count * sizeof(Value));
    std::vector<Value> out;
    out.reserve(r.count);
    for (size_t k = 0; k < r.count; ++k)
      out.push_back(items[static_cast<size_t>(r.first + static_cast<int64_t>(k) * st)]);
    return Value(std::move(out), obj.is_tuple());
  }
  // Strings are walked one code point at a time, forwards or backwards, in one pass.
  const std::string& s = obj.as_string();
  ctx.build(s.size());
  const SliceRange r = slice_range(static_cast<int64_t>(utf8_length(s)), start, stop, st);
  std::string out;
  if (r.count == 0) return out;
  size_t p = utf8_offset(s, static_cast<size_t>(r.first));
  const uint64_t stride = st > 0 ? static_cast<uint64_t>(st) : 0 - static_cast<uint64_t>(st);
  for (size_t k = 0; k < r.count; ++k) {
    if (k > 0)
      for (uint64_t j = 0; j < stride; ++j) p = st > 0 ? utf8_next(s, p) : utf8_prev(s, p);
    out.append(std::string_view(s).substr(p, utf8_next(s, p) - p));
  }
  return out;
}

std::string percent_format(Context& ctx, const std::string& fmt, const Value& args) {
  std::vector<Value> values = args.is_tuple() ? args.items() : std::vector<Value>{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      const size_t end = std::min(fmt.find('%', i), fmt.size());
      ctx.append(out, std::string_view(fmt).substr(i, end - i));
      i = end - 1;
      continue;
    }
    size_t j = i + 1;
    std::string flags;
    while (j < fmt.size() && std::string_view("-+ 0#").find(fmt[j]) != std::string_view::npos)
      flags += fmt[j++];
    std::string width, precision;
    while (j < fmt.size() && fmt[j] >= '0' && fmt[j] <= '9') width += fmt[j++];
    if (j < fmt.size() && fmt[j] == '.') {
      ++j;
      while (j < fmt.size() && fmt[j] >= '0' && fmt[j] <= '9') precision += fmt[j++];
      if (precision.empty()) precision = "0";
    }
    if (j >= fmt.size()) throw_error("incomplete format");
    const char conv = fmt[j];
    i = j;
    if (conv == '%') {
      ctx.append(out, "%");
      continue;
    }
    if (next >= values.size()) throw_error("not enough arguments for format string");
    const Value& v = values[next++];
    // Translate to a format() spec: same flags, width and precision.
    std::string spec;
    if (flags.find('-') != std::string::npos)
      spec += '<';
    else if (conv == 's' || conv == 'r')
      spec += '>';
    if (flags.find('+') != std::string::npos)
      spec += '+';
    else if (flags.find(' ') != std::string::npos)
      spec += ' ';
    if (flags.find('0') != std::string::npos && flags.find('-') == std::string::npos) spec += '0';
    spec += width;
    if (conv == 's' || conv == 'r') {
      if (!precision.empty()) spec += "." + precision;
      ctx.append(out, pystr::format_value(ctx, Value(conv == 's' ? v.str() : v.repr()), spec));
    } else if (conv == 'd' || conv == 'i' || conv == 'u') {
      if (!v.is_number()) throw_error("%", conv, " format: a real number is required, not ", v.type_name());
      const Value n = v.is_float() ? Value(int_from_double(v.as_double())) : Value(v.as_int());
      ctx.append(out, pystr::format_value(ctx, n, spec + "d"));
    } else if (std::string_view("fFeEgGxXo").find(conv) != std::string_view::npos) {
      if (!v.is_number()) throw_error("must be real number, not ", v.type_name());
      if (!precision.empty()) spec += "." + precision;
      const Value n = conv == 'x' || conv == 'X' || conv == 'o' ? Value(v.as_int()) : Value(v.as_double());
      ctx.append(out, pystr::format_value(ctx, n, spec + conv));
    } else {
      throw_error("unsupported format character '", conv, "'");
    }
  }
  if (next < values.size() && args.is_tuple())
    throw_error("not all arguments converted during string formatting");
  return out;
}

bool contains(Context& ctx, const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::undefined:
      return false;
    case Value::Kind::string:
      if (item.is_undefined()) item.fail_undefined();
      if (!item.is_string())
        throw_error("'in <string>' requires string as left operand, not ", item.type_name());
      ctx.work(container.as_string().size());
      return pystr::find(container.as_string(), item.as_string()) != std::string::npos;
    case Value::Kind::list:
      for (const auto& v : container.items())
        if (v == item) return true;
      return false;
    case Value::Kind::dict:
      if (!container.is_namespace()) return container.dict().find(item) != nullptr;
      [[fallthrough]];
    default:
      throw_error("argument of type '", container.type_name(), "' is not iterable");
  }
}

}  // namespace tfm::jinja

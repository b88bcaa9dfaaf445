#include "tfm/jinja/builtins.h"

#include <cstdio>
#include <set>

#include "tfm/core/error.h"
#include "tfm/jinja/context.h"
#include "tfm/jinja/strings.h"

namespace tfm::jinja {
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

int64_t int_arg(const Value& v, int64_t fallback) {
  if (v.is_undefined() || v.is_none()) return fallback;
  if (!v.is_number() || v.is_float())
    throw_error("'", v.type_name(), "' object cannot be interpreted as an integer");
  return v.as_int();
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value(std::move(out));
}

// Python's bounds for s[start:end] used by find/count/startswith.
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

std::string align(const std::string& s, const Args& a, char how) {
  const int64_t width = int_arg(a.get(0, "width"), 0);
  const std::string fill = a.positional.size() > 1 ? a.positional[1].as_string() : " ";
  const auto len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return s;
  const int64_t n = width - len;
  auto rep = [&](int64_t k) {
    std::string out;
    for (int64_t i = 0; i < k; ++i) out += fill;
    return out;
  };
  if (how == '<') return s + rep(n);
  if (how == '>') return rep(n) + s;
  // Python's center puts the extra fill on the left when the width and padding are both odd.
  const int64_t left = n / 2 + (n & width & 1);
  return rep(left) + s + rep(n - left);
}

Value string_method(const Value& self, const std::string& name, Args& a) {
  const std::string& s = self.as_string();
  const Value none(nullptr);
  if (name == "startswith" || name == "endswith") {
    check_arity(a, 1, name);
    return affix_match(s, a.get(0, "prefix"), name == "startswith");
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    check_arity(a, 1, name);
    return pystr::strip(s, a.get(0, "chars", none), name != "rstrip", name != "lstrip");
  }
  if (name == "split" || name == "rsplit") {
    check_arity(a, 2, name);
    const Value sep = a.get(0, "sep", none);
    const int64_t maxsplit = int_arg(a.get(1, "maxsplit"), -1);
    return string_list(name == "split" ? pystr::split(s, sep, maxsplit) : pystr::rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines")
    return string_list(pystr::splitlines(s, a.get(0, "keepends", Value(false)).truthy()));
  if (name == "replace") {
    check_arity(a, 3, name);
    return pystr::replace(s, string_arg(a.get(0, "old"), "replace() argument 1"),
                          string_arg(a.get(1, "new"), "replace() argument 2"),
                          int_arg(a.get(2, "count"), -1));
  }
  if (name == "upper") return pystr::upper(s);
  if (name == "lower" || name == "casefold") return pystr::lower(s);
  if (name == "title") return pystr::title(s);
  if (name == "swapcase") return pystr::swapcase(s);
  if (name == "capitalize") return pystr::capitalize(s);
  if (name == "format") return pystr::format(s, a);
  if (name == "join") {
    std::string out;
    const auto items = a.get(0, "iterable").iterate();
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += s;
      out += string_arg(items[i], "sequence item");
    }
    return out;
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const std::string& x = string_arg(a.get(0, "sub"), "must be str");
    if (name == "count") {
      if (x.empty()) return static_cast<int64_t>(utf8_length(s) + 1);
      int64_t n = 0;
      for (size_t p = s.find(x); p != std::string::npos; p = s.find(x, p + x.size())) ++n;
      return n;
    }
    const size_t p = name[0] == 'r' ? s.rfind(x) : s.find(x);
    if (p == std::string::npos) {
      if (name == "index" || name == "rindex") throw_error("substring not found");
      return int64_t{-1};
    }
    return static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, p)));
  }
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal" || name == "isalpha" ||
      name == "isalnum" || name == "isspace" || name == "isupper" || name == "islower") {
    if (s.empty()) return false;
    bool cased = false;
    for (const auto& c : utf8_chars(s)) {
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
  if (name == "zfill") {
    const int64_t width = int_arg(a.get(0, "width"), 0);
    const auto len = static_cast<int64_t>(utf8_length(s));
    if (width <= len) return s;
    const size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
    return s.substr(0, sign) + std::string(static_cast<size_t>(width - len), '0') + s.substr(sign);
  }
  if (name == "center") return align(s, a, '^');
  if (name == "ljust") return align(s, a, '<');
  if (name == "rjust") return align(s, a, '>');
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string& x = string_arg(a.get(0, "affix"), name.c_str());
    if (name == "removeprefix") return s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s;
    return affix_match(s, x, false) ? s.substr(0, s.size() - x.size()) : s;
  }
  if (name == "partition" || name == "rpartition") {
    const std::string& x = string_arg(a.get(0, "sep"), name.c_str());
    if (x.empty()) throw_error("empty separator");
    const size_t p = name == "partition" ? s.find(x) : s.rfind(x);
    if (p == std::string::npos)
      return name == "partition" ? Value({Value(s), Value(""), Value("")}, true)
                                 : Value({Value(""), Value(""), Value(s)}, true);
    return Value({Value(s.substr(0, p)), Value(x), Value(s.substr(p + x.size()))}, true);
  }
  throw_error("'str' object has no attribute '", name, "'");
}

Value list_method(const Value& self, const std::string& name, Args& a) {
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
  if (name == "copy") return Value(items);
  throw_error("'", self.type_name(), "' object has no attribute '", name, "'");
}

Value dict_method(const Value& self, const std::string& name, Args& a) {
  const DictData& d = self.dict();
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
            Value (*method)(const Value&, const std::string&, Args&)) {
  return Value::callable(name, [self, name, method](Context&, Args& a) { return method(self, name, a); });
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

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) obj.fail_undefined();
  if (obj.is_dict() && !obj.is_namespace()) {
    if (const Value* v = obj.dict().find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && key.is_number() && !key.is_float()) {
    const bool is_str = obj.is_string();
    std::vector<std::string> chars;
    if (is_str) chars = utf8_chars(obj.as_string());
    const auto n = static_cast<int64_t>(is_str ? chars.size() : obj.items().size());
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      const auto k = static_cast<size_t>(i);
      return is_str ? Value(chars[k]) : obj.items()[k];
    }
    return Value::undefined("'" + object_name(obj) + "' has no element " + key.repr());
  }
  if (key.is_string()) return get_attribute(obj, key.as_string());
  return Value::undefined("'" + object_name(obj) + "' has no element " + key.repr());
}

Value slice(const Value& obj, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step) {
  if (obj.is_undefined()) obj.fail_undefined();
  if (!obj.is_string() && !obj.is_list()) throw_error("'", obj.type_name(), "' object is not subscriptable");
  const int64_t st = step.value_or(1);
  if (st == 0) throw_error("slice step cannot be zero");
  std::vector<std::string> chars;
  if (obj.is_string()) chars = utf8_chars(obj.as_string());
  const auto n = static_cast<int64_t>(obj.is_string() ? chars.size() : obj.items().size());
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) x += n;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = clamp(start, st > 0 ? 0 : n - 1), e = clamp(stop, st > 0 ? n : -1);
  std::string s;
  std::vector<Value> items;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (obj.is_string())
      s += chars[static_cast<size_t>(i)];
    else
      items.push_back(obj.items()[static_cast<size_t>(i)]);
  }
  if (obj.is_string()) return s;
  return Value(std::move(items), obj.is_tuple());
}

std::string percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> values = args.is_tuple() ? args.items() : std::vector<Value>{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
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
      out += '%';
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
      out += pystr::format_value(Value(conv == 's' ? v.str() : v.repr()), spec);
    } else if (conv == 'd' || conv == 'i' || conv == 'u') {
      if (!v.is_number()) throw_error("%", conv, " format: a real number is required, not ", v.type_name());
      out += pystr::format_value(Value(v.is_float() ? static_cast<int64_t>(v.as_double()) : v.as_int()),
                                 spec + "d");
    } else if (std::string_view("fFeEgGxXo").find(conv) != std::string_view::npos) {
      if (!v.is_number()) throw_error("must be real number, not ", v.type_name());
      if (!precision.empty()) spec += "." + precision;
      out += pystr::format_value(
          conv == 'x' || conv == 'X' || conv == 'o' ? Value(v.as_int()) : Value(v.as_double()), spec + conv);
    } else {
      throw_error("unsupported format character '", conv, "'");
    }
  }
  if (next < values.size() && args.is_tuple())
    throw_error("not all arguments converted during string formatting");
  return out;
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::undefined:
      return false;
    case Value::Kind::string:
      if (item.is_undefined()) item.fail_undefined();
      if (!item.is_string())
        throw_error("'in <string>' requires string as left operand, not ", item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
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

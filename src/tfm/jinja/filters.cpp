// Jinja2's built-in filters, tests and globals.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tfm/core/error.h"
#include "tfm/jinja/builtins.h"
#include "tfm/jinja/context.h"
#include "tfm/jinja/strings.h"

namespace tfm::jinja {
namespace {

// Jinja2's attribute getter for map/selectattr/sort...: "a.b.0" walks attributes and items.
Value get_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = digits ? get_item(cur, Value(static_cast<int64_t>(std::stoll(part)))) : get_item(cur, Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
      return 0;
    case Value::Kind::string:
      return static_cast<int64_t>(utf8_length(v.as_string()));
    case Value::Kind::list:
      return static_cast<int64_t>(v.items().size());
    case Value::Kind::dict:
      if (!v.is_namespace()) return static_cast<int64_t>(v.dict().items.size());
      [[fallthrough]];
    default:
      throw_error("object of type '", v.type_name(), "' has no len()");
  }
}

// For sort, unique, min, max: strings compare case-insensitively unless asked otherwise.
Value sort_key(const Value& v, bool case_sensitive, const Value& attribute) {
  Value k = attribute.is_undefined() || attribute.is_none() ? v : get_path(v, attribute.str());
  if (!case_sensitive && k.is_string()) return pystr::lower(k.as_string());
  return k;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Python's round(x, n) for floats: round half to even on the exact binary value.
double python_round(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n == 0) return std::nearbyint(x);
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::clamp<int64_t>(n, 0, 300)), x);
  if (n < 0) {
    const double p = std::pow(10.0, static_cast<double>(-n));
    return std::nearbyint(x / p) * p;
  }
  return std::strtod(buf, nullptr);
}

std::optional<int64_t> parse_int(const std::string& text, int base) {
  std::string s = pystr::strip(text, Value(nullptr), true, true);
  std::string digits;
  for (char c : s)
    if (c != '_') digits += c;
  if (digits.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (errno || *end) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<double> parse_float(const std::string& text) {
  std::string s = pystr::strip(text, Value(nullptr), true, true);
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end) return std::nullopt;
  return v;
}

Value do_int(const Value& v, const Args& a) {
  const Value fallback = a.get(0, "default", Value(int64_t{0}));
  const int base = static_cast<int>(a.get(1, "base", Value(int64_t{10})).as_int());
  if (v.is_number()) return v.is_float() ? Value(static_cast<int64_t>(v.as_double())) : Value(v.as_int());
  if (v.is_string()) {
    if (auto i = parse_int(v.as_string(), base)) return *i;
    if (auto d = parse_float(v.as_string()); d && std::isfinite(*d)) return static_cast<int64_t>(*d);
  }
  return fallback;
}

Value do_float(const Value& v, const Args& a) {
  const Value fallback = a.get(0, "default", Value(0.0));
  if (v.is_number()) return v.as_double();
  if (v.is_string())
    if (auto d = parse_float(v.as_string())) return *d;
  return fallback;
}

Value do_tojson(const Value& v, const Args& a) {
  // Jinja2's own tojson: keys sorted, and <, >, &, ' escaped for HTML.
  json::DumpOptions o;
  o.sort_keys = true;
  const Value indent = a.get(0, "indent", Value(nullptr));
  if (!indent.is_none()) {
    o.indent = static_cast<int>(indent.as_int());
    o.item_separator = ",";
  }
  const std::string s = json::dump(v.to_json(), o);
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      case '\'':
        out += "\\u0027";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value do_indent(const Value& v, const Args& a) {
  const Value w = a.get(0, "width", Value(int64_t{4}));
  const std::string indention =
      w.is_string() ? w.as_string() : std::string(static_cast<size_t>(w.as_int()), ' ');
  const bool first = a.get(1, "first", Value(false)).truthy();
  const bool blank = a.get(2, "blank", Value(false)).truthy();
  const std::vector<std::string> lines = pystr::splitlines(v.str() + "\n", false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + indention : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : indention) + lines[i];
  }
  return first ? indention + rv : rv;
}

// The Jinja2 title filter: capitalizes each word, words start after whitespace, '-', and opening brackets.
std::string jinja_title(const std::string& s) {
  std::string out;
  bool word_start = true;
  for (const std::string& c : utf8_chars(s)) {
    const bool sep = c == " " || c == "\t" || c == "\n" || c == "\r" || c == "\f" || c == "\v" || c == "-" ||
                     c == "(" || c == "{" || c == "[" || c == "<";
    if (sep) {
      out += c;
      word_start = true;
    } else {
      out += word_start ? pystr::upper(c) : pystr::lower(c);
      word_start = false;
    }
  }
  return out;
}

// select/reject/selectattr/rejectattr share this: keep items whose test result equals `keep`.
Value select(Context& ctx, const Value& seq, Args& a, bool keep, bool by_attribute) {
  size_t i = 0;
  std::string attribute;
  if (by_attribute) {
    if (a.positional.empty()) throw_error("selectattr/rejectattr need an attribute");
    attribute = a.positional[i++].str();
  }
  std::string test;
  if (i < a.positional.size()) test = a.positional[i++].str();
  Args test_args;
  test_args.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(i), a.positional.end());
  test_args.keyword = a.keyword;
  std::vector<Value> out;
  for (const auto& item : seq.iterate()) {
    const Value subject = by_attribute ? get_path(item, attribute) : item;
    Args ta = test_args;
    const bool passed = test.empty() ? subject.truthy() : ctx.call_test(test, subject, ta);
    if (passed == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value do_map(Context& ctx, const Value& seq, Args& a) {
  std::vector<Value> out;
  const Value attribute = a.get(SIZE_MAX, "attribute");
  if (!attribute.is_undefined()) {
    const Value fallback = a.get(SIZE_MAX, "default");
    for (const auto& item : seq.iterate()) {
      Value v = get_path(item, attribute.str());
      out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
    }
    return Value(std::move(out));
  }
  if (a.positional.empty()) throw_error("map requires a filter argument");
  const std::string filter = a.positional[0].str();
  Args rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const auto& item : seq.iterate()) {
    Args ra = rest;
    out.push_back(ctx.call_filter(filter, item, ra));
  }
  return Value(std::move(out));
}

Value do_sort(const Value& seq, const Args& a) {
  const bool reverse = a.get(0, "reverse", Value(false)).truthy();
  const bool case_sensitive = a.get(1, "case_sensitive", Value(false)).truthy();
  const Value attribute = a.get(2, "attribute");
  std::vector<Value> items = seq.iterate();
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i)
    keyed.emplace_back(sort_key(items[i], case_sensitive, attribute), i);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? y.first.less(x.first) : x.first.less(y.first);
  });
  std::vector<Value> out;
  for (const auto& [k, i] : keyed) out.push_back(items[i]);
  return Value(std::move(out));
}

Value do_min_max(const Value& seq, const Args& a, bool max) {
  const bool case_sensitive = a.get(0, "case_sensitive", Value(false)).truthy();
  const Value attribute = a.get(1, "attribute");
  const std::vector<Value> items = seq.iterate();
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  size_t best = 0;
  Value best_key = sort_key(items[0], case_sensitive, attribute);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(items[i], case_sensitive, attribute);
    if (max ? best_key.less(k) : k.less(best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Value range(Context& ctx, Args& a) {
  if (a.positional.empty() || a.positional.size() > 3) throw_error("range expected 1 to 3 arguments");
  for (const auto& v : a.positional)
    if (!v.is_number() || v.is_float())
      throw_error("'", v.type_name(), "' object cannot be interpreted as an integer");
  int64_t start = 0, stop, step = 1;
  if (a.positional.size() == 1) {
    stop = a.positional[0].as_int();
  } else {
    start = a.positional[0].as_int();
    stop = a.positional[1].as_int();
    if (a.positional.size() == 3) step = a.positional[2].as_int();
  }
  if (step == 0) throw_error("range() arg 3 must not be zero");
  std::vector<Value> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (out.size() >= 100000)
      throw_error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    out.emplace_back(i);
  }
  ctx.step();
  return Value(std::move(out));
}

Value dict_from_args(const Args& a, bool is_namespace) {
  Value d = make_dict({}, is_namespace);
  if (a.positional.size() > 1) throw_error("dict expected at most 1 argument");
  if (!a.positional.empty()) {
    const Value& src = a.positional[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict().items) d.mutable_dict().set(k, v);
    } else {
      for (const auto& pair : src.iterate()) {
        const auto kv = pair.iterate();
        if (kv.size() != 2)
          throw_error("dictionary update sequence element has length ", kv.size(), "; 2 is required");
        d.mutable_dict().set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : a.keyword) d.mutable_dict().set(Value(k), v);
  return d;
}

bool same_as(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_list() || a.is_dict() || a.is_callable() || a.is_string() || a.is_float())
    return a.repr() == b.repr() && a == b;
  return a == b;
}

void add_filters(Environment& env) {
  auto& f = env.filters;
  f["abs"] = [](Context&, const Value& v, Args&) -> Value {
    if (!v.is_number()) throw_error("bad operand type for abs(): '", v.type_name(), "'");
    if (v.is_float()) return std::fabs(v.as_double());
    return v.as_int() < 0 ? -v.as_int() : v.as_int();
  };
  f["attr"] = [](Context&, const Value& v, Args& a) {
    // Attributes only: a dict's members are items, not attributes, so only its methods are found.
    const std::string name = a.get(0, "name").str();
    if (v.is_dict() && !v.is_namespace() && !get_attribute(make_dict(), name).is_callable())
      return Value::undefined("'dict object' has no attribute '" + name + "'");
    return get_attribute(v, name);
  };
  f["batch"] = [](Context&, const Value& v, Args& a) {
    const int64_t n = a.get(0, "linecount").as_int();
    if (n <= 0) throw_error("batch size must be positive");
    const Value fill = a.get(1, "fill_with", Value(nullptr));
    std::vector<Value> out, cur;
    for (const auto& item : v.iterate()) {
      cur.push_back(item);
      if (static_cast<int64_t>(cur.size()) == n) out.emplace_back(std::exchange(cur, {}));
    }
    if (!cur.empty()) {
      if (!fill.is_none())
        while (static_cast<int64_t>(cur.size()) < n) cur.push_back(fill);
      out.emplace_back(std::move(cur));
    }
    return Value(std::move(out));
  };
  f["capitalize"] = [](Context&, const Value& v, Args&) { return Value(pystr::capitalize(v.str())); };
  f["center"] = [](Context& ctx, const Value& v, Args& a) {
    Args ca{{a.get(0, "width", Value(int64_t{80}))}, {}};
    return ctx.call(get_attribute(Value(v.str()), "center"), ca);
  };
  f["default"] = [](Context&, const Value& v, Args& a) {
    const bool boolean = a.get(1, "boolean", Value(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return a.get(0, "default_value", Value(""));
    return v;
  };
  f["d"] = f["default"];
  f["dictsort"] = [](Context&, const Value& v, Args& a) {
    if (!v.is_dict()) throw_error("You can only sort by either \"key\" or \"value\" of a mapping");
    const bool case_sensitive = a.get(0, "case_sensitive", Value(false)).truthy();
    const std::string by = a.get(1, "by", Value("key")).str();
    const bool reverse = a.get(2, "reverse", Value(false)).truthy();
    std::vector<Value> pairs;
    for (const auto& [k, x] : v.dict().items) pairs.push_back(Value({k, x}, true));
    const size_t pos = by == "value" ? 1 : 0;
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
      const Value kx = sort_key(x.items()[pos], case_sensitive, Value()),
                  ky = sort_key(y.items()[pos], case_sensitive, Value());
      return reverse ? ky.less(kx) : kx.less(ky);
    });
    return Value(std::move(pairs));
  };
  f["escape"] = [](Context&, const Value& v, Args&) { return Value(html_escape(v.str())); };
  f["e"] = f["escape"];
  f["forceescape"] = f["escape"];
  f["first"] = [](Context&, const Value& v, Args&) {
    const auto items = v.iterate();
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  };
  f["last"] = [](Context&, const Value& v, Args&) {
    const auto items = v.iterate();
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  };
  f["float"] = [](Context&, const Value& v, Args& a) { return do_float(v, a); };
  f["int"] = [](Context&, const Value& v, Args& a) { return do_int(v, a); };
  f["format"] = [](Context&, const Value& v, Args& a) {
    if (!a.keyword.empty() && !a.positional.empty())
      throw_error("can't handle positional and keyword arguments at the same time");
    return Value(percent_format(v.str(), Value(a.positional, true)));
  };
  f["indent"] = [](Context&, const Value& v, Args& a) { return do_indent(v, a); };
  f["items"] = [](Context&, const Value& v, Args&) {
    if (v.is_undefined()) return Value(std::vector<Value>{});
    if (!v.is_dict() || v.is_namespace()) throw_error("Can only get item pairs from a mapping.");
    std::vector<Value> out;
    for (const auto& [k, x] : v.dict().items) out.push_back(Value({k, x}, true));
    return Value(std::move(out));
  };
  f["join"] = [](Context& ctx, const Value& v, Args& a) {
    const std::string sep = a.get(0, "d", Value("")).str();
    const Value attribute = a.get(1, "attribute");
    std::string out;
    const auto items = v.iterate();
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += sep;
      out += (attribute.is_undefined() ? items[i] : get_path(items[i], attribute.str())).str();
      ctx.check_size(out.size());
    }
    return Value(std::move(out));
  };
  f["length"] = [](Context&, const Value& v, Args&) { return Value(length(v)); };
  f["count"] = f["length"];
  f["list"] = [](Context&, const Value& v, Args&) { return Value(v.iterate()); };
  f["lower"] = [](Context&, const Value& v, Args&) { return Value(pystr::lower(v.str())); };
  f["upper"] = [](Context&, const Value& v, Args&) { return Value(pystr::upper(v.str())); };
  f["map"] = [](Context& ctx, const Value& v, Args& a) { return do_map(ctx, v, a); };
  f["max"] = [](Context&, const Value& v, Args& a) { return do_min_max(v, a, true); };
  f["min"] = [](Context&, const Value& v, Args& a) { return do_min_max(v, a, false); };
  f["pprint"] = [](Context&, const Value& v, Args&) { return Value(v.repr()); };
  f["reject"] = [](Context& ctx, const Value& v, Args& a) { return select(ctx, v, a, false, false); };
  f["rejectattr"] = [](Context& ctx, const Value& v, Args& a) { return select(ctx, v, a, false, true); };
  f["select"] = [](Context& ctx, const Value& v, Args& a) { return select(ctx, v, a, true, false); };
  f["selectattr"] = [](Context& ctx, const Value& v, Args& a) { return select(ctx, v, a, true, true); };
  f["replace"] = [](Context& ctx, const Value& v, Args& a) {
    const Value count = a.get(2, "count", Value(nullptr));
    std::string out = pystr::replace(v.str(), a.get(0, "old").str(), a.get(1, "new").str(),
                                     count.is_none() ? -1 : count.as_int());
    ctx.check_size(out.size());
    return Value(std::move(out));
  };
  f["reverse"] = [](Context&, const Value& v, Args&) {
    if (v.is_string()) return slice(v, std::nullopt, std::nullopt, -1);
    std::vector<Value> items = v.iterate();
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  };
  f["round"] = [](Context&, const Value& v, Args& a) {
    const int64_t precision = a.get(0, "precision", Value(int64_t{0})).as_int();
    const std::string method = a.get(1, "method", Value("common")).str();
    if (!v.is_number()) throw_error("type ", v.type_name(), " doesn't define __round__ method");
    if (method == "common")
      return v.is_float() ? Value(python_round(v.as_double(), precision)) : Value(v.as_int());
    if (method != "ceil" && method != "floor") throw_error("method must be common, ceil or floor");
    const double p = std::pow(10.0, static_cast<double>(precision));
    const double x = v.as_double() * p;
    return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
  };
  f["safe"] = [](Context&, const Value& v, Args&) { return Value(v.str()); };
  f["string"] = f["safe"];
  f["sort"] = [](Context&, const Value& v, Args& a) { return do_sort(v, a); };
  f["sum"] = [](Context&, const Value& v, Args& a) {
    const Value attribute = a.get(0, "attribute");
    Value total = a.get(1, "start", Value(int64_t{0}));
    for (const auto& item : v.iterate()) {
      const Value x =
          attribute.is_undefined() || attribute.is_none() ? item : get_path(item, attribute.str());
      if (!x.is_number() || !total.is_number())
        throw_error("unsupported operand type(s) for +: '", total.type_name(), "' and '", x.type_name(), "'");
      total = total.is_float() || x.is_float() ? Value(total.as_double() + x.as_double())
                                               : Value(total.as_int() + x.as_int());
    }
    return total;
  };
  f["title"] = [](Context&, const Value& v, Args&) { return Value(jinja_title(v.str())); };
  f["tojson"] = [](Context&, const Value& v, Args& a) { return do_tojson(v, a); };
  f["trim"] = [](Context&, const Value& v, Args& a) {
    return Value(pystr::strip(v.str(), a.get(0, "chars", Value(nullptr)), true, true));
  };
  f["unique"] = [](Context&, const Value& v, Args& a) {
    const bool case_sensitive = a.get(0, "case_sensitive", Value(false)).truthy();
    const Value attribute = a.get(1, "attribute");
    std::vector<Value> out, seen;
    for (const auto& item : v.iterate()) {
      Value k = sort_key(item, case_sensitive, attribute);
      if (std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
      seen.push_back(std::move(k));
      out.push_back(item);
    }
    return Value(std::move(out));
  };
  f["wordcount"] = [](Context&, const Value& v, Args&) {
    int64_t n = 0;
    bool in_word = false;
    for (char c : v.str()) {
      const auto u = static_cast<unsigned char>(c);
      const bool w = std::isalnum(u) || c == '_' || u >= 0x80;
      n += w && !in_word;
      in_word = w;
    }
    return Value(n);
  };
}

void add_tests(Environment& env) {
  auto& t = env.tests;
  t["defined"] = [](Context&, const Value& v, Args&) { return !v.is_undefined(); };
  t["undefined"] = [](Context&, const Value& v, Args&) { return v.is_undefined(); };
  t["none"] = [](Context&, const Value& v, Args&) { return v.is_none(); };
  t["boolean"] = [](Context&, const Value& v, Args&) { return v.is_bool(); };
  t["true"] = [](Context&, const Value& v, Args&) { return v.is_bool() && v.as_bool(); };
  t["false"] = [](Context&, const Value& v, Args&) { return v.is_bool() && !v.as_bool(); };
  t["string"] = [](Context&, const Value& v, Args&) { return v.is_string(); };
  t["number"] = [](Context&, const Value& v, Args&) { return v.is_number(); };
  t["integer"] = [](Context&, const Value& v, Args&) { return v.is_int(); };
  t["float"] = [](Context&, const Value& v, Args&) { return v.is_float(); };
  t["mapping"] = [](Context&, const Value& v, Args&) { return v.is_dict() && !v.is_namespace(); };
  t["iterable"] = [](Context&, const Value& v, Args&) { return v.is_iterable() && !v.is_namespace(); };
  t["sequence"] = [](Context&, const Value& v, Args&) { return v.is_iterable() && !v.is_namespace(); };
  // Jinja2's Undefined has a __call__ (that raises), so it counts as callable.
  t["callable"] = [](Context&, const Value& v, Args&) { return v.is_callable() || v.is_undefined(); };
  t["escaped"] = [](Context&, const Value&, Args&) { return false; };
  t["lower"] = [](Context&, const Value& v, Args&) {
    const std::string s = v.str();
    return pystr::lower(s) == s && pystr::upper(s) != s;
  };
  t["upper"] = [](Context&, const Value& v, Args&) {
    const std::string s = v.str();
    return pystr::upper(s) == s && pystr::lower(s) != s;
  };
  t["even"] = [](Context&, const Value& v, Args&) { return v.as_int() % 2 == 0; };
  t["odd"] = [](Context&, const Value& v, Args&) { return v.as_int() % 2 != 0; };
  t["divisibleby"] = [](Context&, const Value& v, Args& a) {
    const int64_t n = a.get(0, "num").as_int();
    if (n == 0) throw_error("integer division or modulo by zero");
    return v.as_int() % n == 0;
  };
  t["eq"] = [](Context&, const Value& v, Args& a) { return v == a.get(0, "other"); };
  t["equalto"] = t["=="] = t["eq"];
  t["ne"] = [](Context&, const Value& v, Args& a) { return !(v == a.get(0, "other")); };
  t["!="] = t["ne"];
  t["lt"] = [](Context&, const Value& v, Args& a) { return v.less(a.get(0, "other")); };
  t["lessthan"] = t["<"] = t["lt"];
  t["gt"] = [](Context&, const Value& v, Args& a) { return a.get(0, "other").less(v); };
  t["greaterthan"] = t[">"] = t["gt"];
  t["le"] = [](Context&, const Value& v, Args& a) { return !a.get(0, "other").less(v); };
  t["<="] = t["le"];
  t["ge"] = [](Context&, const Value& v, Args& a) { return !v.less(a.get(0, "other")); };
  t[">="] = t["ge"];
  t["in"] = [](Context&, const Value& v, Args& a) { return contains(a.get(0, "seq"), v); };
  t["sameas"] = [](Context&, const Value& v, Args& a) { return same_as(v, a.get(0, "other")); };
  t["filter"] = [](Context& ctx, const Value& v, Args&) { return ctx.env.filters.count(v.str()) > 0; };
  t["test"] = [](Context& ctx, const Value& v, Args&) { return ctx.env.tests.count(v.str()) > 0; };
}

void add_globals(Environment& env) {
  env.globals["range"] = Value::callable("range", range);
  env.globals["dict"] = Value::callable("dict", [](Context&, Args& a) { return dict_from_args(a, false); });
  env.globals["namespace"] = Value::callable("namespace", [](Context& ctx, Args& a) {
    Value ns = dict_from_args(a, true);
    ctx.namespaces.push_back(ns);
    return ns;
  });
  env.globals["joiner"] = Value::callable("joiner", [](Context&, Args& a) {
    const std::string sep = a.get(0, "sep", Value(", ")).str();
    auto used = std::make_shared<bool>(false);
    return Value::callable("joiner", [sep, used](Context&, Args&) {
      if (!*used) {
        *used = true;
        return Value("");
      }
      return Value(sep);
    });
  });
}

}  // namespace

Environment Environment::jinja2_defaults() {
  Environment env;
  add_filters(env);
  add_tests(env);
  add_globals(env);
  return env;
}

}  // namespace tfm::jinja

// Jinja2's built-in filters, tests and globals: jinja2 3.1's FILTERS, TESTS and DEFAULT_NAMESPACE.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "tfm/core/error.h"
#include "tfm/jinja/builtins.h"
#include "tfm/jinja/context.h"
#include "tfm/jinja/strings.h"

namespace tfm::jinja {
namespace {

// ---- attribute lookup, as Jinja2's make_attrgetter ----

// "a.b.0" is looked up part by part, all-digit parts as integers; an integer attribute is one index.
std::vector<Value> attribute_parts(const Value& attribute) {
  if (attribute.is_undefined() || attribute.is_none()) return {};
  if (!attribute.is_string()) return {attribute};
  std::vector<Value> parts;
  const std::string& a = attribute.as_string();
  size_t start = 0;
  while (true) {
    const size_t dot = std::min(a.find('.', start), a.size());
    const std::string_view part = std::string_view(a).substr(start, dot - start);
    const bool digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    int64_t index = 0;
    if (digits && std::from_chars(part.data(), part.data() + part.size(), index).ec == std::errc())
      parts.emplace_back(index);
    else if (digits)  // past 64 bits: no element has that index
      parts.push_back(Value::undefined("no element " + std::string(part)));
    else
      parts.emplace_back(part);
    if (dot == a.size()) return parts;
    start = dot + 1;
  }
}

Value ignore_case(const Value& v) {
  return v.is_string() ? Value(pystr::lower(v.as_string())) : v;
}

struct AttrGetter {
  std::vector<Value> parts;
  Value fallback;  // replaces undefined results when given
  bool lower = false;

  AttrGetter(const Value& attribute, bool lower_strings, Value fallback_value = Value())
      : parts(attribute_parts(attribute)),
        fallback(fallback_value.is_none() ? Value() : std::move(fallback_value)),
        lower(lower_strings) {}
  Value operator()(Context& ctx, const Value& item) const {
    Value v = item;
    for (const auto& part : parts) {
      v = part.is_undefined() ? part : get_item(ctx, v, part);
      if (v.is_undefined() && !fallback.is_undefined()) v = fallback;
    }
    return lower ? ignore_case(v) : v;
  }
};

// ---- helpers ----

int64_t length(Context& ctx, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
      return 0;
    case Value::Kind::string:
      ctx.work(v.as_string().size());
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

// markupsafe.escape: the size is known before the text is built.
std::string html_escape(Context& ctx, const std::string& s) {
  auto entity = [](char c) -> const char* {
    switch (c) {
      case '&':
        return "&amp;";
      case '<':
        return "&lt;";
      case '>':
        return "&gt;";
      case '"':
        return "&#34;";
      case '\'':
        return "&#39;";
      default:
        return nullptr;
    }
  };
  size_t size = 0;
  for (char c : s) size += entity(c) ? std::char_traits<char>::length(entity(c)) : 1;
  ctx.build(size);
  std::string out;
  out.reserve(size);
  for (char c : s) {
    if (const char* e = entity(c))
      out += e;
    else
      out += c;
  }
  return out;
}

// Python's round(x, n) for floats: round half to even on the exact binary value.
double python_round(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n > 400) return x;  // beyond the last digit a double has
  if (n < -400) return 0.0 * x;
  if (n < 0) {
    const double p = std::pow(10.0, static_cast<double>(-n));
    return std::nearbyint(x / p) * p;
  }
  const int digits = static_cast<int>(n);
  const int size = std::snprintf(nullptr, 0, "%.*f", digits, x);
  std::string buf(static_cast<size_t>(size) + 1, '\0');
  std::snprintf(buf.data(), buf.size(), "%.*f", digits, x);
  return std::strtod(buf.c_str(), nullptr);
}

// Python's round(i, n) for ints: only a negative n changes them, rounding half to even.
int64_t python_round(int64_t x, int64_t n) {
  if (n >= 0) return x;
  if (n < -18) return 0;  // 10**19 is past every 64-bit integer
  int64_t p = 1;
  for (int64_t k = 0; k < -n; ++k) p *= 10;
  const int64_t r = int_mod(x, p), base = int_sub(x, r);  // past int64 near its minimum: an overflow error
  if (r > p - r || (r == p - r && int_mod(int_floordiv(base, p), 2) == 1)) return int_add(base, p);
  return base;
}

std::optional<int64_t> parse_int(const std::string& text, int64_t base) {
  if (base != 0 && (base < 2 || base > 36)) return std::nullopt;
  std::string digits;
  for (char c : pystr::strip(text, Value(nullptr), true, true))
    if (c != '_') digits += c;
  if (digits.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
  if (errno || *end) return std::nullopt;
  return static_cast<int64_t>(v);
}

// Python's float(str): decimal notation, inf, infinity and nan; not C's hexadecimal floats.
std::optional<double> parse_float(const std::string& text) {
  const std::string s = pystr::strip(text, Value(nullptr), true, true);
  if (s.empty() || s.find_first_of("xXpP(") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end) return std::nullopt;
  return v;
}

Value do_int(const Value& v, const Args& a) {
  const Value fallback = a.get(0, "default", Value(int64_t{0}));
  const int64_t base = int_arg(a.get(1, "base"), 10);
  if (v.is_bool() || v.is_int()) return v.as_int();
  if (v.is_float()) return std::isnan(v.as_double()) ? fallback : Value(int_from_double(v.as_double()));
  if (v.is_string()) {
    if (auto i = parse_int(v.as_string(), base)) return *i;
    // "42.23"|int is 42; inf and nan give the default, as Jinja2 catches OverflowError there.
    if (auto d = parse_float(v.as_string()); d && std::isfinite(*d)) return int_from_double(*d);
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

Value do_tojson(Context& ctx, const Value& v, const Args& a) {
  // Jinja2's own tojson: keys sorted, and <, >, &, ' escaped for HTML.
  JsonOptions o;
  o.sort_keys = true;
  o.indent = a.get(0, "indent", Value(nullptr));
  const std::string s = dump_json(v, o);
  size_t size = s.size();
  for (char c : s) size += (c == '<' || c == '>' || c == '&' || c == '\'') ? 5 : 0;
  ctx.build(size);
  std::string out;
  out.reserve(size);
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

// A count given as an int (or bool): Python's `" " * width` and the like.
int64_t int_operand(const Value& v, const char* what) {
  if (!v.is_number() || v.is_float()) throw_error(what, " must be an integer, not ", v.type_name());
  return v.as_int();
}

Value do_indent(Context& ctx, const Value& v, const Args& a) {
  const Value w = a.get(0, "width", Value(int64_t{4}));
  std::string indention;
  if (w.is_string()) {
    indention = w.as_string();
  } else {
    const int64_t n = std::max<int64_t>(int_operand(w, "indent width"), 0);
    ctx.build(static_cast<size_t>(n));
    indention.assign(static_cast<size_t>(n), ' ');
  }
  const bool first = a.get(1, "first", Value(false)).truthy();
  const bool blank = a.get(2, "blank", Value(false)).truthy();
  const std::vector<std::string> lines = pystr::splitlines(ctx, v.str() + "\n", false);
  size_t size = 0, indents = first ? 1 : 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    size += lines[i].size() + (i ? 1 : 0);
    indents += i && (blank || !lines[i].empty());
  }
  size_t indent_bytes = 0;
  if (__builtin_mul_overflow(indents, indention.size(), &indent_bytes) ||
      __builtin_add_overflow(size, indent_bytes, &size))
    size = SIZE_MAX;
  ctx.build(size);
  std::string rv = first ? indention : "";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) rv += '\n';
    if (i && (blank || !lines[i].empty())) rv += indention;
    rv += lines[i];
  }
  return rv;
}

// The Jinja2 title filter: capitalizes each word, words start after whitespace, '-', and opening brackets.
std::string jinja_title(const std::string& s) {
  std::string out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    const size_t next = utf8_next(s, i);
    const std::string_view c = std::string_view(s).substr(i, next - i);
    i = next;
    const bool sep = pystr::is_space(c) || c == "-" || c == "(" || c == "{" || c == "[" || c == "<";
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
  Value attribute;
  if (by_attribute) {
    if (a.positional.empty()) throw_error("Missing parameter for attribute name");
    attribute = a.positional[i++];
  }
  const AttrGetter getter(attribute, false);
  std::string test;
  if (i < a.positional.size()) test = a.positional[i++].str();
  Args test_args;
  test_args.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(i), a.positional.end());
  test_args.keyword = a.keyword;
  std::vector<Value> out;
  for (const auto& item : ctx.iterate(seq)) {
    const Value subject = getter(ctx, item);
    Args ta = test_args;
    const bool passed = test.empty() ? subject.truthy() : ctx.call_test(test, subject, ta);
    if (passed == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value do_map(Context& ctx, const Value& seq, Args& a) {
  std::vector<Value> out;
  const Value attribute = a.get(SIZE_MAX, "attribute");
  if (a.positional.empty() && !attribute.is_undefined()) {
    for (const auto& [k, v] : a.keyword)
      if (k != "attribute" && k != "default") throw_error("Unexpected keyword argument '", k, "'");
    const AttrGetter getter(attribute, false, a.get(SIZE_MAX, "default"));
    for (const auto& item : ctx.iterate(seq)) out.push_back(getter(ctx, item));
    return Value(std::move(out));
  }
  if (a.positional.empty()) throw_error("map requires a filter argument");
  const std::string filter = a.positional[0].str();
  Args rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const auto& item : ctx.iterate(seq)) {
    Args ra = rest;
    out.push_back(ctx.call_filter(filter, item, ra));
  }
  return Value(std::move(out));
}

// Python's sorted(items, key=...): stable, by the keys' <.
std::vector<Value> sorted(Context& ctx, std::vector<Value> items,
                          const std::function<Value(const Value&)>& key, bool reverse) {
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(key(items[i]), i);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? y.first.less(x.first) : x.first.less(y.first);
  });
  std::vector<Value> out;
  ctx.build(items.size() * sizeof(Value));
  for (const auto& [k, i] : keyed) out.push_back(items[i]);
  return out;
}

Value do_sort(Context& ctx, const Value& seq, const Args& a) {
  const bool reverse = a.get(0, "reverse", Value(false)).truthy();
  const bool case_sensitive = a.get(1, "case_sensitive", Value(false)).truthy();
  const Value attribute = a.get(2, "attribute");
  // "a,b" sorts by a, then b (make_multi_attrgetter).
  std::vector<AttrGetter> getters;
  if (attribute.is_string()) {
    for (const auto& part : pystr::split(ctx, attribute.as_string(), Value(","), -1))
      getters.emplace_back(Value(part), !case_sensitive);
  } else {
    getters.emplace_back(attribute, !case_sensitive);
  }
  return Value(sorted(
      ctx, ctx.iterate(seq),
      [&](const Value& item) {
        std::vector<Value> key;
        for (const auto& g : getters) key.push_back(g(ctx, item));
        return Value(std::move(key));
      },
      reverse));
}

Value do_min_max(Context& ctx, const Value& seq, const Args& a, bool max) {
  const bool case_sensitive = a.get(0, "case_sensitive", Value(false)).truthy();
  const AttrGetter key(a.get(1, "attribute"), !case_sensitive);
  const std::vector<Value> items = ctx.iterate(seq);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  size_t best = 0;
  Value best_key = key(ctx, items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(ctx, items[i]);
    if (max ? best_key.less(k) : k.less(best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Value do_sum(Context& ctx, const Value& seq, const Args& a) {
  const AttrGetter key(a.get(0, "attribute"), false);
  Value total = a.get(1, "start", Value(int64_t{0}));
  if (total.is_string()) throw_error("sum() can't sum strings [use ''.join(seq) instead]");
  for (const auto& item : ctx.iterate(seq)) total = binary_op(ctx, "+", total, key(ctx, item));
  return total;
}

Value do_unique(Context& ctx, const Value& seq, const Args& a) {
  const bool case_sensitive = a.get(0, "case_sensitive", Value(false)).truthy();
  const AttrGetter key(a.get(1, "attribute"), !case_sensitive);
  std::vector<Value> out, seen;
  for (const auto& item : ctx.iterate(seq)) {
    Value k = key(ctx, item);
    if (std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
    seen.push_back(std::move(k));
    out.push_back(item);
  }
  return Value(std::move(out));
}

Value do_dictsort(Context& ctx, const Value& v, const Args& a) {
  const bool case_sensitive = a.get(0, "case_sensitive", Value(false)).truthy();
  const std::string by = a.get(1, "by", Value("key")).str();
  const bool reverse = a.get(2, "reverse", Value(false)).truthy();
  if (by != "key" && by != "value") throw_error("You can only sort by either \"key\" or \"value\"");
  if (!v.is_dict() || v.is_namespace()) throw_error("'", v.type_name(), "' object has no attribute 'items'");
  ctx.build(v.dict().items.size() * 2 * sizeof(Value));
  std::vector<Value> pairs;
  for (const auto& [k, x] : v.dict().items) pairs.push_back(Value({k, x}, true));
  const size_t pos = by == "value" ? 1 : 0;
  return Value(sorted(
      ctx, std::move(pairs),
      [&](const Value& pair) { return case_sensitive ? pair.items()[pos] : ignore_case(pair.items()[pos]); },
      reverse));
}

const std::vector<std::string> kGroupFields = {"grouper", "list"};

Value do_groupby(Context& ctx, const Value& seq, const Args& a) {
  const Value attribute = a.get(0, "attribute");
  const Value fallback = a.get(1, "default", Value(nullptr));
  const bool case_sensitive = a.get(2, "case_sensitive", Value(false)).truthy();
  const AttrGetter key(attribute, !case_sensitive, fallback), shown(attribute, false, fallback);
  const std::vector<Value> items = sorted(
      ctx, ctx.iterate(seq), [&](const Value& x) { return key(ctx, x); }, false);
  std::vector<Value> out;
  for (size_t i = 0; i < items.size();) {
    const Value k = key(ctx, items[i]);
    std::vector<Value> group;
    for (; i < items.size() && key(ctx, items[i]) == k; ++i) group.push_back(items[i]);
    // Without case_sensitive the group is named by its first item's own key, not the lowered one.
    Value name = case_sensitive ? k : shown(ctx, group.front());
    out.push_back(Value::named_tuple({std::move(name), Value(std::move(group))}, kGroupFields));
  }
  return Value(std::move(out));
}

Value do_batch(Context& ctx, const Value& v, const Args& a) {
  const int64_t n = int_operand(a.get(0, "linecount"), "batch linecount");
  const Value fill = a.get(1, "fill_with", Value(nullptr));
  std::vector<Value> out, cur;
  for (const auto& item : ctx.iterate(v)) {
    if (static_cast<int64_t>(cur.size()) == n) out.emplace_back(std::exchange(cur, {}));
    cur.push_back(item);
  }
  if (!cur.empty()) {
    if (!fill.is_none() && static_cast<int64_t>(cur.size()) < n) {
      ctx.build(static_cast<size_t>(n) * sizeof(Value));
      cur.resize(static_cast<size_t>(n), fill);
    }
    out.emplace_back(std::move(cur));
  }
  return Value(std::move(out));
}

Value do_slice(Context& ctx, const Value& v, const Args& a) {
  const int64_t slices = int_operand(a.get(0, "slices"), "slice count");
  const Value fill = a.get(1, "fill_with", Value(nullptr));
  const std::vector<Value> seq = ctx.iterate(v);
  const auto length = static_cast<int64_t>(seq.size());
  if (slices == 0) throw_error("integer division or modulo by zero");
  if (slices < 0) return Value(std::vector<Value>{});
  ctx.build((static_cast<size_t>(slices) + seq.size()) * sizeof(Value));
  const int64_t per_slice = int_floordiv(length, slices), with_extra = int_mod(length, slices);
  std::vector<Value> out;
  int64_t offset = 0;
  for (int64_t k = 0; k < slices; ++k) {
    const int64_t start = offset + k * per_slice;
    if (k < with_extra) ++offset;
    const int64_t end = offset + (k + 1) * per_slice;
    std::vector<Value> part(seq.begin() + start, seq.begin() + end);
    if (!fill.is_none() && k >= with_extra) part.push_back(fill);
    out.emplace_back(std::move(part));
  }
  return Value(std::move(out));
}

Value do_truncate(Context& ctx, const Value& v, const Args& a) {
  const std::string s = v.str();
  const int64_t length = int_arg(a.get(0, "length"), 255);
  const bool killwords = a.get(1, "killwords", Value(false)).truthy();
  const std::string end = a.get(2, "end", Value("...")).str();
  const int64_t leeway = int_arg(a.get(3, "leeway"), 5);
  const auto end_len = static_cast<int64_t>(utf8_length(end));
  if (length < end_len) throw_error("expected length >= ", end_len, ", got ", length);
  if (leeway < 0) throw_error("expected leeway >= 0, got ", leeway);
  ctx.work(s.size());
  const auto len = static_cast<int64_t>(utf8_length(s));
  if (len <= length || len - length <= leeway) return s;
  std::string head = s.substr(0, utf8_offset(s, static_cast<size_t>(length - end_len)));
  if (!killwords) {
    const size_t space = head.rfind(' ');
    if (space != std::string::npos) head.resize(space);
  }
  return head + end;
}

// textwrap's chunks with break_on_hyphens: runs of whitespace, words, and the parts of hyphenated words and
// of em-dashes (TextWrapper.wordsep_re, which only counts ASCII whitespace as whitespace).
std::vector<std::string_view> wrap_chunks(std::string_view s, bool break_on_hyphens) {
  std::vector<std::string_view> cps;  // code points
  for (size_t i = 0; i < s.size();) {
    const size_t next = utf8_next(s, i);
    cps.push_back(s.substr(i, next - i));
    i = next;
  }
  const size_t n = cps.size();
  auto ws = [&](size_t i) {
    return i < n && cps[i].size() == 1 &&
           std::string_view(" \t\n\v\f\r").find(cps[i][0]) != std::string_view::npos;
  };
  auto is = [&](size_t i, char c) { return i < n && cps[i].size() == 1 && cps[i][0] == c; };
  auto word = [&](size_t i) { return i < n && pystr::is_word(cps[i]); };
  auto letter = [&](size_t i) { return word(i) && !pystr::is_decimal(cps[i]); };
  auto punct = [&](size_t i) {  // [\w!"'&.,?]
    return word(i) ||
           (cps[i].size() == 1 && std::string_view("!\"'&.,?").find(cps[i][0]) != std::string_view::npos);
  };
  auto dashes_then_word = [&](size_t i) {  // -{2,}\w
    size_t k = i;
    while (is(k, '-')) ++k;
    return k - i >= 2 && word(k);
  };
  std::vector<std::string_view> chunks;
  auto bytes = [&](size_t b, size_t e) {
    return s.substr(cps[b].data() - s.data(), (e < n ? cps[e].data() : s.data() + s.size()) - cps[b].data());
  };
  for (size_t p = 0; p < n;) {
    size_t e = p + 1;
    if (ws(p)) {
      while (ws(e)) ++e;
    } else if (break_on_hyphens && p > 0 && punct(p - 1) && dashes_then_word(p)) {
      while (is(e, '-')) ++e;
    } else if (!break_on_hyphens) {
      while (e < n && !ws(e)) ++e;
    } else {
      // The shortest run of non-whitespace that ends a hyphenated part, the word, or before an em-dash.
      for (;; ++e) {
        if (is(e, '-') &&
            ((letter(e - 2) && letter(e - 1)) ||
             (letter(e - 3) && is(e - 2, '-') && letter(e - 1) && e >= 3)) &&
            letter(e + 1) && (letter(e + 2) || (is(e + 2, '-') && letter(e + 3)))) {
          ++e;
          break;
        }
        if (e >= n || ws(e)) break;
        if (punct(e - 1) && dashes_then_word(e)) break;
      }
    }
    chunks.push_back(bytes(p, e));
    p = e;
  }
  return chunks;
}

// textwrap.wrap(text, width, expand_tabs=False, replace_whitespace=False, break_long_words,
// break_on_hyphens).
std::vector<std::string> wrap(std::string_view text, size_t width, bool break_long_words,
                              bool break_on_hyphens) {
  std::vector<std::string_view> chunks = wrap_chunks(text, break_on_hyphens);
  std::reverse(chunks.begin(), chunks.end());
  auto blank = [](std::string_view c) { return pystr::strip(c, Value(nullptr), true, true).empty(); };
  std::vector<std::string> lines;
  while (!chunks.empty()) {
    std::vector<std::string_view> line;
    size_t len = 0;
    if (!lines.empty() && blank(chunks.back())) chunks.pop_back();
    while (!chunks.empty() && len + utf8_length(chunks.back()) <= width) {
      len += utf8_length(chunks.back());
      line.push_back(chunks.back());
      chunks.pop_back();
    }
    if (!chunks.empty() && utf8_length(chunks.back()) > width) {
      // A word longer than a line: break it where the line ends (after its last hyphen there), or put it on a
      // line of its own.
      if (break_long_words) {
        const std::string_view chunk = chunks.back();
        const size_t space_left = std::max<size_t>(width - len, 1);
        size_t end = utf8_offset(chunk, space_left);
        if (break_on_hyphens) {
          const size_t hyphen = chunk.substr(0, end).rfind('-');
          if (hyphen != std::string_view::npos && hyphen > 0 &&
              chunk.substr(0, hyphen).find_first_not_of('-') != std::string_view::npos)
            end = hyphen + 1;
        }
        line.push_back(chunk.substr(0, end));
        chunks.back() = chunk.substr(end);
        if (chunks.back().empty()) chunks.pop_back();
      } else if (line.empty()) {
        line.push_back(chunks.back());
        chunks.pop_back();
      }
    }
    if (!line.empty() && blank(line.back())) line.pop_back();
    if (line.empty()) continue;
    std::string joined;
    for (const auto& c : line) joined += c;
    lines.push_back(std::move(joined));
  }
  return lines;
}

Value do_wordwrap(Context& ctx, const Value& v, const Args& a) {
  const std::string s = v.str();
  const int64_t width = int_arg(a.get(0, "width"), 79);
  const bool break_long_words = a.get(1, "break_long_words", Value(true)).truthy();
  const Value wrapstring = a.get(2, "wrapstring", Value(nullptr));
  const std::string sep = wrapstring.is_none() ? "\n" : wrapstring.str();
  const bool break_on_hyphens = a.get(3, "break_on_hyphens", Value(true)).truthy();
  if (width <= 0) throw_error("invalid width ", width, " (must be > 0)");
  std::string out;
  bool first_line = true;
  for (const auto& paragraph : pystr::splitlines(ctx, s, false)) {
    if (!first_line) ctx.append(out, sep);
    first_line = false;
    const auto lines = wrap(paragraph, static_cast<size_t>(width), break_long_words, break_on_hyphens);
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) ctx.append(out, sep);
      ctx.append(out, lines[i]);
    }
  }
  return out;
}

// HTML's character references, as html.unescape reads them: numeric ones and the common named ones.
std::string html_unescape(const std::string& s) {
  static const std::pair<std::string_view, std::string_view> kNamed[] = {{"amp", "&"},
                                                                         {"lt", "<"},
                                                                         {"gt", ">"},
                                                                         {"quot", "\""},
                                                                         {"apos", "'"},
                                                                         {"nbsp", "\xc2\xa0"},
                                                                         {"copy", "\xc2\xa9"},
                                                                         {"reg", "\xc2\xae"},
                                                                         {"raquo", "\xc2\xbb"},
                                                                         {"laquo", "\xc2\xab"},
                                                                         {"hellip", "\xe2\x80\xa6"},
                                                                         {"mdash", "\xe2\x80\x94"},
                                                                         {"ndash", "\xe2\x80\x93"}};
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    const std::string_view ref =
        semi == std::string::npos ? std::string_view() : std::string_view(s).substr(i + 1, semi - i - 1);
    bool done = false;
    if (ref.size() > 1 && ref[0] == '#') {
      const bool hex = ref[1] == 'x' || ref[1] == 'X';
      const std::string_view digits = ref.substr(hex ? 2 : 1);
      uint32_t cp = 0;
      const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
      if (ec == std::errc() && p == digits.data() + digits.size() && !digits.empty()) {
        json::append_utf8(out, cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? 0xfffd : cp);
        done = true;
      }
    } else {
      for (const auto& [name, text] : kNamed)
        if (ref == name) {
          out += text;
          done = true;
        }
    }
    if (done)
      i = semi;
    else
      out += '&';
  }
  return out;
}

// markupsafe's Markup.striptags: comments and tags removed, whitespace collapsed, references unescaped.
Value do_striptags(Context& ctx, const Value& v) {
  const std::string s = v.str();
  ctx.work(s.size());
  // Comments first, then tags, each up to its end mark; an unclosed one stays.
  auto remove = [](std::string value, std::string_view open, std::string_view close) {
    std::string out;
    size_t i = 0;
    while (true) {
      const size_t start = value.find(open, i);
      const size_t end = start == std::string::npos ? start : value.find(close, start);
      if (end == std::string::npos) break;
      out.append(value, i, start - i);
      i = end + close.size();
    }
    out.append(value, i);
    return out;
  };
  const std::string text = remove(remove(s, "<!--", "-->"), "<", ">");
  std::string collapsed;
  for (const auto& word : pystr::split(ctx, text, Value(nullptr), -1)) {
    if (!collapsed.empty()) collapsed += ' ';
    collapsed += word;
  }
  return html_unescape(collapsed);
}

std::string format_size(Context& ctx, double x) {
  return pystr::format_value(ctx, Value(x), ".1f");
}

Value do_filesizeformat(Context& ctx, const Value& v, const Args& a) {
  double bytes = 0;
  if (v.is_number()) {
    bytes = v.as_double();
  } else if (auto d = v.is_string() ? parse_float(v.as_string()) : std::nullopt) {
    bytes = *d;
  } else {
    throw_error("could not convert ", v.type_name(), " to float: ", v.repr());
  }
  const bool binary = a.get(0, "binary", Value(false)).truthy();
  const double base = binary ? 1024 : 1000;
  static const char* const kDecimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  static const char* const kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  if (bytes == 1) return Value("1 Byte");
  if (bytes < base) return Value(std::to_string(int_from_double(bytes)) + " Bytes");
  double unit = base;
  for (size_t i = 0; i < 8; ++i) {
    unit *= base;
    if (bytes < unit || i == 7)
      return Value(format_size(ctx, base * bytes / unit) + " " + (binary ? kBinary[i] : kDecimal[i]));
  }
  return Value();
}

Value do_xmlattr(Context& ctx, const Value& v, const Args& a) {
  if (!v.is_dict() || v.is_namespace()) throw_error("'", v.type_name(), "' object has no attribute 'items'");
  const bool autospace = a.get(0, "autospace", Value(true)).truthy();
  std::string out;
  for (const auto& [k, x] : v.dict().items) {
    if (x.is_none() || x.is_undefined()) continue;
    if (!k.is_string()) throw_error("expected string or bytes-like object, got '", k.type_name(), "'");
    const std::string& key = k.as_string();
    for (size_t i = 0; i < key.size();) {
      const size_t next = utf8_next(key, i);
      const std::string_view c = std::string_view(key).substr(i, next - i);
      if (pystr::is_space(c) || c == "/" || c == ">" || c == "=")
        throw_error("Invalid character in attribute name: ", k.repr());
      i = next;
    }
    if (!out.empty() || autospace) ctx.append(out, " ");
    ctx.append(out, html_escape(ctx, key));
    ctx.append(out, "=\"");
    ctx.append(out, html_escape(ctx, x.str()));
    ctx.append(out, "\"");
  }
  return out;
}

// urllib.parse.quote of the UTF-8 bytes: letters, digits and "_.-~" (and "/" unless for a query) stay.
std::string url_quote(Context& ctx, const std::string& s, bool for_qs) {
  ctx.build(s.size() * 3);
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || c == '_' || c == '.' ||
        c == '-' || c == '~' || (c == '/' && !for_qs)) {
      out += c;
    } else if (c == ' ' && for_qs) {
      out += '+';
    } else {
      static const char* hex = "0123456789ABCDEF";
      out += '%';
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  return out;
}

Value do_urlencode(Context& ctx, const Value& v) {
  if (v.is_string() || !v.is_iterable() || v.is_namespace() || v.is_undefined())
    return url_quote(ctx, v.str(), false);
  std::vector<Value> pairs;
  if (v.is_dict()) {
    for (const auto& [k, x] : v.dict().items) pairs.push_back(Value({k, x}, true));
  } else {
    pairs = ctx.iterate(v);
  }
  std::string out;
  for (const auto& pair : pairs) {
    const auto kv = ctx.iterate(pair);
    if (kv.size() != 2) throw_error("too many values to unpack (expected 2)");
    if (!out.empty()) ctx.append(out, "&");
    ctx.append(out, url_quote(ctx, kv[0].str(), true));
    ctx.append(out, "=");
    ctx.append(out, url_quote(ctx, kv[1].str(), true));
  }
  return out;
}

// ---- urlize: jinja2.utils.urlize, its regular expressions written out ----

struct CodePoints {
  std::vector<std::string_view> c;
  explicit CodePoints(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
      const size_t next = utf8_next(s, i);
      c.push_back(s.substr(i, next - i));
      i = next;
    }
  }
  size_t size() const { return c.size(); }
  bool is(size_t i, char ch) const { return i < c.size() && c[i].size() == 1 && c[i][0] == ch; }
  bool ascii_letter(size_t i) const {
    return i < c.size() && c[i].size() == 1 && ((c[i][0] | 0x20) >= 'a' && (c[i][0] | 0x20) <= 'z');
  }
  bool word(size_t i) const { return i < c.size() && pystr::is_word(c[i]); }
  bool digit(size_t i) const { return i < c.size() && pystr::is_decimal(c[i]); }
  bool hex(size_t i) const {
    return digit(i) ||
           (i < c.size() && c[i].size() == 1 && (c[i][0] | 0x20) >= 'a' && (c[i][0] | 0x20) <= 'f');
  }
  bool host(size_t i) const { return word(i) || is(i, '%') || is(i, '-'); }  // [\w%-]
  bool starts_with(size_t i, std::string_view prefix) const {                // ASCII, ignoring case
    for (size_t k = 0; k < prefix.size(); ++k)
      if (!(i + k < c.size() && c[i + k].size() == 1 && (c[i + k][0] | 0x20) == prefix[k])) return false;
    return true;
  }
};

// (?::\d{1,5})?(?:[/?#]\S*)?$ from position i.
bool url_tail(const CodePoints& w, size_t i) {
  if (w.is(i, ':')) {
    size_t k = i + 1;
    while (w.digit(k)) ++k;
    if (k == i + 1 || k - i - 1 > 5) return false;
    i = k;
  }
  return i == w.size() || w.is(i, '/') || w.is(i, '?') || w.is(i, '#');
}

// ([\w%-]+\.)* then a top-level domain ending at `end`: `tld(begin, end)` says whether the last label is one;
// `min_label` is the shortest label before it.
template <typename Tld>
bool domain(const CodePoints& w, size_t begin, size_t end, size_t min_label, size_t max_label,
            bool need_label, Tld tld) {
  size_t start = begin, labels = 0;
  for (size_t i = begin; i < end; ++i) {
    if (!w.is(i, '.')) continue;
    if (i - start < min_label || i - start > max_label) return false;
    for (size_t k = start; k < i; ++k)
      if (!w.host(k)) return false;
    start = i + 1;
    ++labels;
  }
  return (labels > 0 || !need_label) && tld(start, end);
}

// The bracketed IPv6 address of _http_re, from '[' at i; the position after ']', or 0.
size_t ipv6(const CodePoints& w, size_t i) {
  if (!w.is(i, '[')) return 0;
  size_t k = i + 1;
  for (int g = 0; g < 2; ++g) {  // ([\da-f]{0,4}:){2}
    size_t h = 0;
    while (h < 4 && w.hex(k)) ++h, ++k;
    if (!w.is(k, ':')) return 0;
    ++k;
  }
  // ([\da-f]{0,4}:?){1,6}: the fewest groups that cover the rest.
  size_t groups = 0, run = 0;
  bool colon_free = false;  // the last group can still take a ':'
  for (; !w.is(k, ']'); ++k) {
    if (w.hex(k)) {
      if (run == 0 || run == 4) ++groups, run = 0;
      ++run;
      colon_free = true;
    } else if (w.is(k, ':')) {
      if (!colon_free) ++groups;
      colon_free = false;
      run = 0;
    } else {
      return 0;
    }
  }
  return groups <= 6 ? k + 1 : 0;
}

bool http_url(const CodePoints& w) {
  const size_t n = w.size();
  size_t scheme = w.starts_with(0, "https://") ? 8 : w.starts_with(0, "http://") ? 7 : 0;
  size_t host_end = 0;
  auto run_end = [&](size_t i) {  // the host: [\w%.-]*
    while (w.host(i) || w.is(i, '.')) ++i;
    return i;
  };
  const size_t after_www = w.starts_with(0, "www.") ? 4 : 0;
  if (scheme || after_www) {
    const size_t begin = scheme ? scheme : after_www;
    host_end = run_end(begin);
    const bool ok = domain(w, begin, host_end, 1, SIZE_MAX, false, [&](size_t b, size_t e) {
      if (w.starts_with(b, "xn--")) {
        if (e - b - 4 < 2 || e - b - 4 > 59) return false;
        for (size_t k = b + 4; k < e; ++k)
          if (!w.word(k) && !w.is(k, '%')) return false;
        return true;
      }
      if (e - b < 2 || e - b > 63) return false;
      for (size_t k = b; k < e; ++k)
        if (!w.ascii_letter(k)) return false;
      return true;
    });
    if (ok && url_tail(w, host_end)) return true;
  }
  host_end = run_end(0);
  const bool basic = domain(w, 0, host_end, 2, 63, true, [&](size_t b, size_t e) {
    for (std::string_view tld : {"com", "net", "int", "edu", "gov", "org", "info", "mil"})
      if (e - b == tld.size() && w.starts_with(b, tld)) return true;
    return false;
  });
  if (basic && url_tail(w, host_end)) return true;
  if (!scheme) return false;
  if (const size_t after = ipv6(w, scheme)) return url_tail(w, after);
  size_t k = scheme;
  for (int g = 0; g < 4; ++g) {  // \d{1,3}(\.\d{1,3}){3}
    if (g && !w.is(k++, '.')) return false;
    size_t d = 0;
    while (d < 3 && w.digit(k)) ++d, ++k;
    if (d == 0) return false;
  }
  return k <= n && url_tail(w, k);
}

// ^\S+@\w[\w.-]*\.\w+$
bool email(std::string_view text) {
  const CodePoints w(text);
  const size_t n = w.size();
  size_t last_dot = n;
  for (size_t k = n; k-- > 0;)
    if (w.is(k, '.')) {
      last_dot = k;
      break;
    }
  if (last_dot + 1 >= n) return false;
  for (size_t k = last_dot + 1; k < n; ++k)
    if (!w.word(k)) return false;
  // Some '@' with a non-empty head, then \w and [\w.-] up to the last dot.
  for (size_t at = 1; at + 1 < last_dot; ++at) {
    if (!w.is(at, '@') || !w.word(at + 1)) continue;
    bool ok = true;
    for (size_t k = at + 2; k < last_dot && ok; ++k) ok = w.word(k) || w.is(k, '.') || w.is(k, '-');
    if (ok) {
      for (size_t k = 0; k < at && ok; ++k) ok = !pystr::is_space(w.c[k]);
      if (ok) return true;
    }
  }
  return false;
}

Value do_urlize(Context& ctx, const Value& v, const Args& a) {
  const Value trim_limit = a.get(0, "trim_url_limit", Value(nullptr));
  const bool nofollow = a.get(1, "nofollow", Value(false)).truthy();
  const Value target = a.get(2, "target", Value(nullptr));
  const Value rel_arg = a.get(3, "rel", Value(nullptr));
  const Value extra = a.get(4, "extra_schemes", Value(nullptr));
  std::vector<std::string> rel_parts{"noopener"};
  if (nofollow) rel_parts.emplace_back("nofollow");
  if (!rel_arg.is_none() && !rel_arg.is_undefined())
    for (auto& p : pystr::split(ctx, rel_arg.str(), Value(nullptr), -1)) rel_parts.push_back(std::move(p));
  std::sort(rel_parts.begin(), rel_parts.end());
  rel_parts.erase(std::unique(rel_parts.begin(), rel_parts.end()), rel_parts.end());
  std::string rel;
  for (const auto& p : rel_parts) rel += (rel.empty() ? "" : " ") + p;
  std::vector<std::string> schemes;
  if (!extra.is_none() && !extra.is_undefined())
    for (const auto& s : ctx.iterate(extra)) {
      const std::string scheme = s.str();
      // ^([\w.+-]{2,}:(/){0,2})$
      const size_t colon = scheme.find(':');
      const CodePoints w(std::string_view(scheme).substr(0, colon == std::string::npos ? 0 : colon));
      bool ok = colon != std::string::npos && w.size() >= 2 && scheme.size() - colon - 1 <= 2 &&
                scheme.find_first_not_of('/', colon + 1) == std::string::npos;
      for (size_t k = 0; k < w.size() && ok; ++k)
        ok = w.word(k) || w.is(k, '.') || w.is(k, '+') || w.is(k, '-');
      if (!ok) throw_error(s.repr(), " is not a valid URI scheme prefix.");
      schemes.push_back(scheme);
    }
  const std::string rel_attr = " rel=\"" + html_escape(ctx, rel) + "\"";
  const std::string target_attr = target.is_none() || target.is_undefined() || !target.truthy()
                                      ? ""
                                      : " target=\"" + html_escape(ctx, target.str()) + "\"";
  auto trim = [&](const std::string& url) {
    if (trim_limit.is_none() || trim_limit.is_undefined()) return url;
    const int64_t limit = int_arg(trim_limit, 0);
    if (static_cast<int64_t>(utf8_length(url)) <= limit) return url;
    return url.substr(0, utf8_offset(url, static_cast<size_t>(std::max<int64_t>(limit, 0)))) + "...";
  };

  const std::string text = html_escape(ctx, v.str());
  std::string out;
  for (size_t i = 0; i < text.size();) {
    // Words and the whitespace between them (re.split(r"(\s+)")); whitespace passes unchanged.
    size_t e = i;
    const bool space = pystr::is_space(std::string_view(text).substr(i, utf8_next(text, i) - i));
    while (e < text.size() &&
           pystr::is_space(std::string_view(text).substr(e, utf8_next(text, e) - e)) == space)
      e = utf8_next(text, e);
    std::string middle = text.substr(i, e - i);
    i = e;
    if (space) {
      ctx.append(out, middle);
      continue;
    }
    std::string head, tail;
    // ^([(<]|&lt;)+ and ([)>.,\n]|&gt;)+$
    while (true) {
      const size_t k = head.size();
      if (middle.compare(k, 1, "(") == 0 || middle.compare(k, 1, "<") == 0)
        head = middle.substr(0, k + 1);
      else if (middle.compare(k, 4, "&lt;") == 0)
        head = middle.substr(0, k + 4);
      else
        break;
    }
    middle.erase(0, head.size());
    while (!middle.empty()) {
      const char c = middle.back();
      if (c == ')' || c == '>' || c == '.' || c == ',' || c == '\n') {
        tail.insert(0, 1, c);
        middle.pop_back();
      } else if (middle.size() >= 4 && middle.compare(middle.size() - 4, 4, "&gt;") == 0) {
        tail.insert(0, "&gt;");
        middle.resize(middle.size() - 4);
      } else {
        break;
      }
    }
    // Prefer balancing parentheses in URLs to leaving a closing one in the tail.
    for (const auto& [open, close] :
         {std::pair<std::string, std::string>{"(", ")"}, {"<", ">"}, {"&lt;", "&gt;"}}) {
      auto count = [](const std::string& s, const std::string& x) {
        size_t n = 0;
        for (size_t p = s.find(x); p != std::string::npos; p = s.find(x, p + x.size())) ++n;
        return n;
      };
      const size_t opens = count(middle, open);
      if (opens <= count(middle, close)) continue;
      for (size_t k = std::min(opens, count(tail, close)); k > 0; --k) {
        const size_t end = tail.find(close) + close.size();
        middle += tail.substr(0, end);
        tail.erase(0, end);
      }
    }
    const CodePoints w(middle);
    if (http_url(w)) {
      const bool has_scheme = middle.rfind("https://", 0) == 0 || middle.rfind("http://", 0) == 0;
      middle = "<a href=\"" + std::string(has_scheme ? "" : "https://") + middle + "\"" + rel_attr +
               target_attr + ">" + trim(middle) + "</a>";
    } else if (middle.rfind("mailto:", 0) == 0 && email(std::string_view(middle).substr(7))) {
      middle = "<a href=\"" + middle + "\">" + middle.substr(7) + "</a>";
    } else if (middle.find('@') != std::string::npos && middle.rfind("www.", 0) != 0 && middle[0] != '@' &&
               middle.find(':') == std::string::npos && email(middle)) {
      middle = "<a href=\"mailto:" + middle + "\">" + middle + "</a>";
    } else {
      for (const auto& scheme : schemes)
        if (middle != scheme && middle.rfind(scheme, 0) == 0)
          middle = "<a href=\"" + middle + "\"" + rel_attr + target_attr + ">" + middle + "</a>";
    }
    ctx.append(out, head);
    ctx.append(out, middle);
    ctx.append(out, tail);
  }
  return out;
}

std::mt19937_64& random_engine() {
  static thread_local std::mt19937_64 engine{std::random_device{}()};
  return engine;
}

// A uniform pick from [0, n).
size_t random_below(size_t n) {
  return std::uniform_int_distribution<size_t>(0, n - 1)(random_engine());
}

constexpr std::string_view kLoremIpsumWords =
    "a ac accumsan ad adipiscing aenean aliquam aliquet amet ante aptent arcu at auctor augue bibendum "
    "blandit "
    "class commodo condimentum congue consectetuer consequat conubia convallis cras cubilia cum curabitur "
    "curae "
    "cursus dapibus diam dictum dictumst dignissim dis dolor donec dui duis egestas eget eleifend elementum "
    "elit "
    "enim erat eros est et etiam eu euismod facilisi facilisis fames faucibus felis fermentum feugiat "
    "fringilla "
    "fusce gravida habitant habitasse hac hendrerit hymenaeos iaculis id imperdiet in inceptos integer "
    "interdum "
    "ipsum justo lacinia lacus laoreet lectus leo libero ligula litora lobortis lorem luctus maecenas magna "
    "magnis malesuada massa mattis mauris metus mi molestie mollis montes morbi mus nam nascetur natoque nec "
    "neque netus nibh nisi nisl non nonummy nostra nulla nullam nunc odio orci ornare parturient pede "
    "pellentesque penatibus per pharetra phasellus placerat platea porta porttitor posuere potenti praesent "
    "pretium primis proin pulvinar purus quam quis quisque rhoncus ridiculus risus rutrum sagittis sapien "
    "scelerisque sed sem semper senectus sit sociis sociosqu sodales sollicitudin suscipit suspendisse "
    "taciti "
    "tellus tempor tempus tincidunt torquent tortor tristique turpis ullamcorper ultrices ultricies urna ut "
    "varius vehicula vel velit venenatis vestibulum vitae vivamus viverra volutpat vulputate";

// jinja2.utils.generate_lorem_ipsum: n paragraphs of min to max-1 random words, with commas and full stops.
Value lipsum(Context& ctx, Args& a) {
  const int64_t n = int_arg(a.get(0, "n"), 5);
  const bool html = a.get(1, "html", Value(true)).truthy();
  const int64_t min = int_arg(a.get(2, "min"), 20), max = int_arg(a.get(3, "max"), 100);
  if (n > 0 && min >= max) throw_error("empty range for randrange() (", min, ", ", max, ")");
  std::vector<std::string_view> words;
  for (size_t i = 0; i < kLoremIpsumWords.size();) {
    const size_t end = std::min(kLoremIpsumWords.find(' ', i), kLoremIpsumWords.size());
    words.push_back(kLoremIpsumWords.substr(i, end - i));
    i = end + 1;
  }
  auto randrange = [](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(random_below(static_cast<size_t>(hi - lo)));
  };
  std::string out;
  for (int64_t p = 0; p < n; ++p) {
    ctx.step();
    const int64_t count = randrange(min, max);
    std::string paragraph;
    bool capitalize = true;
    int64_t last_comma = 0, last_fullstop = 0;
    std::string_view last;
    for (int64_t idx = 0; idx < count; ++idx) {
      std::string_view pick;
      do pick = words[random_below(words.size())];
      while (pick == last);
      last = pick;
      std::string word(pick);
      if (capitalize) {
        word[0] = static_cast<char>(word[0] - 'a' + 'A');
        capitalize = false;
      }
      if (idx - randrange(3, 8) > last_comma) {
        last_comma = idx;
        last_fullstop += 2;
        word += ',';
      }
      if (idx - randrange(10, 20) > last_fullstop) {
        last_comma = last_fullstop = idx;
        word += '.';
        capitalize = true;
      }
      if (!paragraph.empty()) ctx.append(paragraph, " ");
      ctx.append(paragraph, word);
    }
    if (!paragraph.empty() && paragraph.back() == ',') paragraph.back() = '.';
    if (paragraph.empty() || paragraph.back() != '.') paragraph += '.';
    if (html) {
      ctx.append(out, p ? "\n<p>" : "<p>");
      ctx.append(out, paragraph);
      ctx.append(out, "</p>");
    } else {
      ctx.append(out, p ? "\n\n" : "");
      ctx.append(out, paragraph);
    }
  }
  return out;
}

// jinja2.utils.Cycler: next() returns the current item and moves on, reset() goes back to the first, and
// `current` is the item next() returns. Its state lives in a namespace, which the render empties at its end
// (the methods refer to the namespace that holds them).
Value cycler(Context& ctx, Args& a) {
  if (a.positional.empty()) throw_error("at least one item has to be provided");
  Value state = make_dict({}, /*is_namespace=*/true);
  ctx.namespaces.push_back(state);
  const auto items = std::make_shared<const std::vector<Value>>(a.positional);
  const auto pos = std::make_shared<size_t>(0);
  DictData& d = state.mutable_dict();
  d.set(Value("current"), items->front());
  d.set(Value("next"), Value::callable("next", [state, items, pos](Context&, Args&) {
          const Value rv = (*items)[*pos];
          *pos = (*pos + 1) % items->size();
          state.mutable_dict().set(Value("current"), (*items)[*pos]);
          return rv;
        }));
  d.set(Value("reset"), Value::callable("reset", [state, items, pos](Context&, Args&) {
          *pos = 0;
          state.mutable_dict().set(Value("current"), items->front());
          return Value(nullptr);
        }));
  return state;
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
  // The length as Python's range computes it, in unsigned arithmetic so that no bound overflows.
  const uint64_t span = step > 0 ? static_cast<uint64_t>(stop) - static_cast<uint64_t>(start)
                                 : static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
  const uint64_t stride = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  const bool empty = step > 0 ? start >= stop : start <= stop;
  const uint64_t n = empty ? 0 : (span - 1) / stride + 1;
  if (n > 100000) throw_error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  ctx.step();
  std::vector<Value> out;
  out.reserve(n);
  for (uint64_t k = 0; k < n; ++k)
    out.emplace_back(static_cast<int64_t>(static_cast<uint64_t>(start) + k * static_cast<uint64_t>(step)));
  return Value(std::move(out));
}

Value dict_from_args(Context& ctx, const Args& a, bool is_namespace) {
  Value d = make_dict({}, is_namespace);
  if (a.positional.size() > 1) throw_error("dict expected at most 1 argument");
  if (!a.positional.empty()) {
    const Value& src = a.positional[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict().items) d.mutable_dict().set(k, v);
    } else {
      for (const auto& pair : ctx.iterate(src)) {
        const auto kv = ctx.iterate(pair);
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
    return v.as_int() < 0 ? int_sub(0, v.as_int()) : v.as_int();
  };
  f["attr"] = [](Context&, const Value& v, Args& a) {
    // Attributes only: a dict's members are items, not attributes, so only its methods are found.
    const std::string name = a.get(0, "name").str();
    if (v.is_dict() && !v.is_namespace() && !get_attribute(make_dict(), name).is_callable())
      return Value::undefined("'dict object' has no attribute '" + name + "'");
    return get_attribute(v, name);
  };
  f["batch"] = [](Context& ctx, const Value& v, Args& a) { return do_batch(ctx, v, a); };
  f["capitalize"] = [](Context&, const Value& v, Args&) { return Value(pystr::capitalize(v.str())); };
  f["center"] = [](Context& ctx, const Value& v, Args& a) {
    return Value(pystr::align(ctx, v.str(),
                              int_operand(a.get(0, "width", Value(int64_t{80})), "center width"), " ", '^'));
  };
  f["default"] = [](Context&, const Value& v, Args& a) {
    const bool boolean = a.get(1, "boolean", Value(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return a.get(0, "default_value", Value(""));
    return v;
  };
  f["d"] = f["default"];
  f["dictsort"] = [](Context& ctx, const Value& v, Args& a) { return do_dictsort(ctx, v, a); };
  f["escape"] = [](Context& ctx, const Value& v, Args&) { return Value(html_escape(ctx, v.str())); };
  f["e"] = f["escape"];
  f["forceescape"] = f["escape"];
  f["filesizeformat"] = [](Context& ctx, const Value& v, Args& a) { return do_filesizeformat(ctx, v, a); };
  f["first"] = [](Context& ctx, const Value& v, Args&) {
    if (v.is_string() && !v.as_string().empty())
      return Value(v.as_string().substr(0, utf8_next(v.as_string(), 0)));
    const auto items = ctx.iterate(v);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  };
  f["last"] = [](Context& ctx, const Value& v, Args&) {
    if (v.is_string() && !v.as_string().empty()) {
      const std::string& s = v.as_string();
      return Value(s.substr(utf8_prev(s, s.size())));
    }
    const auto items = ctx.iterate(v);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  };
  f["float"] = [](Context&, const Value& v, Args& a) { return do_float(v, a); };
  f["int"] = [](Context&, const Value& v, Args& a) { return do_int(v, a); };
  f["format"] = [](Context& ctx, const Value& v, Args& a) {
    if (!a.keyword.empty() && !a.positional.empty())
      throw_error("can't handle positional and keyword arguments at the same time");
    return Value(percent_format(ctx, v.str(), Value(a.positional, true)));
  };
  f["groupby"] = [](Context& ctx, const Value& v, Args& a) { return do_groupby(ctx, v, a); };
  f["indent"] = [](Context& ctx, const Value& v, Args& a) { return do_indent(ctx, v, a); };
  f["items"] = [](Context& ctx, const Value& v, Args&) {
    if (v.is_undefined()) return Value(std::vector<Value>{});
    if (!v.is_dict() || v.is_namespace()) throw_error("Can only get item pairs from a mapping.");
    ctx.build(v.dict().items.size() * 2 * sizeof(Value));
    std::vector<Value> out;
    for (const auto& [k, x] : v.dict().items) out.push_back(Value({k, x}, true));
    return Value(std::move(out));
  };
  f["join"] = [](Context& ctx, const Value& v, Args& a) {
    const std::string sep = a.get(0, "d", Value("")).str();
    const AttrGetter key(a.get(1, "attribute"), false);
    std::string out;
    const auto items = ctx.iterate(v);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) ctx.append(out, sep);
      ctx.append(out, key(ctx, items[i]).str());
    }
    return Value(std::move(out));
  };
  f["length"] = [](Context& ctx, const Value& v, Args&) { return Value(length(ctx, v)); };
  f["count"] = f["length"];
  f["list"] = [](Context& ctx, const Value& v, Args&) { return Value(ctx.iterate(v)); };
  f["lower"] = [](Context& ctx, const Value& v, Args&) {
    ctx.work(v.str().size());
    return Value(pystr::lower(v.str()));
  };
  f["upper"] = [](Context& ctx, const Value& v, Args&) {
    ctx.work(v.str().size());
    return Value(pystr::upper(v.str()));
  };
  f["map"] = [](Context& ctx, const Value& v, Args& a) { return do_map(ctx, v, a); };
  f["max"] = [](Context& ctx, const Value& v, Args& a) { return do_min_max(ctx, v, a, true); };
  f["min"] = [](Context& ctx, const Value& v, Args& a) { return do_min_max(ctx, v, a, false); };
  f["pprint"] = [](Context&, const Value& v, Args&) { return Value(v.repr()); };
  f["random"] = [](Context& ctx, const Value& v, Args&) {
    if (v.is_dict()) throw_error("random: a mapping has no random item by position");
    const auto items = ctx.iterate(v);
    return items.empty() ? Value::undefined("No random item, sequence was empty.")
                         : items[random_below(items.size())];
  };
  f["reject"] = [](Context& ctx, const Value& v, Args& a) { return select(ctx, v, a, false, false); };
  f["rejectattr"] = [](Context& ctx, const Value& v, Args& a) { return select(ctx, v, a, false, true); };
  f["select"] = [](Context& ctx, const Value& v, Args& a) { return select(ctx, v, a, true, false); };
  f["selectattr"] = [](Context& ctx, const Value& v, Args& a) { return select(ctx, v, a, true, true); };
  f["replace"] = [](Context& ctx, const Value& v, Args& a) {
    const Value count = a.get(2, "count", Value(nullptr));
    return Value(pystr::replace(ctx, v.str(), a.get(0, "old").str(), a.get(1, "new").str(),
                                count.is_none() ? -1 : int_operand(count, "replace count")));
  };
  f["reverse"] = [](Context& ctx, const Value& v, Args&) {
    if (v.is_string()) return slice(ctx, v, std::nullopt, std::nullopt, -1);
    std::vector<Value> items = ctx.iterate(v);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  };
  f["round"] = [](Context&, const Value& v, Args& a) {
    const int64_t precision = int_arg(a.get(0, "precision"), 0);
    const std::string method = a.get(1, "method", Value("common")).str();
    if (method != "common" && method != "ceil" && method != "floor")
      throw_error("method must be common, ceil or floor");
    if (!v.is_number()) throw_error("type ", v.type_name(), " doesn't define __round__ method");
    if (method == "common")
      return v.is_float() ? Value(python_round(v.as_double(), precision))
                          : Value(python_round(v.as_int(), precision));
    const double p = std::pow(10.0, static_cast<double>(precision));
    const double x = v.as_double() * p;
    return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
  };
  f["safe"] = [](Context&, const Value& v, Args&) { return Value(v.str()); };
  f["string"] = f["safe"];
  f["slice"] = [](Context& ctx, const Value& v, Args& a) { return do_slice(ctx, v, a); };
  f["sort"] = [](Context& ctx, const Value& v, Args& a) { return do_sort(ctx, v, a); };
  f["striptags"] = [](Context& ctx, const Value& v, Args&) { return do_striptags(ctx, v); };
  f["sum"] = [](Context& ctx, const Value& v, Args& a) { return do_sum(ctx, v, a); };
  f["title"] = [](Context& ctx, const Value& v, Args&) {
    ctx.work(v.str().size());
    return Value(jinja_title(v.str()));
  };
  f["tojson"] = [](Context& ctx, const Value& v, Args& a) { return do_tojson(ctx, v, a); };
  f["trim"] = [](Context& ctx, const Value& v, Args& a) {
    ctx.work(v.str().size());
    return Value(pystr::strip(v.str(), a.get(0, "chars", Value(nullptr)), true, true));
  };
  f["truncate"] = [](Context& ctx, const Value& v, Args& a) { return do_truncate(ctx, v, a); };
  f["unique"] = [](Context& ctx, const Value& v, Args& a) { return do_unique(ctx, v, a); };
  f["urlencode"] = [](Context& ctx, const Value& v, Args&) { return do_urlencode(ctx, v); };
  f["urlize"] = [](Context& ctx, const Value& v, Args& a) { return do_urlize(ctx, v, a); };
  f["wordcount"] = [](Context& ctx, const Value& v, Args&) {
    const std::string s = v.str();
    ctx.work(s.size());
    int64_t n = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.size();) {
      const size_t next = utf8_next(s, i);
      const bool w = pystr::is_word(std::string_view(s).substr(i, next - i));
      n += w && !in_word;
      in_word = w;
      i = next;
    }
    return Value(n);
  };
  f["wordwrap"] = [](Context& ctx, const Value& v, Args& a) { return do_wordwrap(ctx, v, a); };
  f["xmlattr"] = [](Context& ctx, const Value& v, Args& a) { return do_xmlattr(ctx, v, a); };
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
  t["even"] = [](Context&, const Value& v, Args&) { return int_mod(int_operand(v, "even"), 2) == 0; };
  t["odd"] = [](Context&, const Value& v, Args&) { return int_mod(int_operand(v, "odd"), 2) == 1; };
  t["divisibleby"] = [](Context&, const Value& v, Args& a) {
    return int_mod(int_operand(v, "divisibleby"), int_operand(a.get(0, "num"), "divisibleby")) == 0;
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
  t["in"] = [](Context& ctx, const Value& v, Args& a) { return contains(ctx, a.get(0, "seq"), v); };
  t["sameas"] = [](Context&, const Value& v, Args& a) { return same_as(v, a.get(0, "other")); };
  t["filter"] = [](Context& ctx, const Value& v, Args&) { return ctx.env.filters.count(v.str()) > 0; };
  t["test"] = [](Context& ctx, const Value& v, Args&) { return ctx.env.tests.count(v.str()) > 0; };
}

void add_globals(Environment& env) {
  env.globals["range"] = Value::callable("range", range);
  env.globals["dict"] =
      Value::callable("dict", [](Context& ctx, Args& a) { return dict_from_args(ctx, a, false); });
  env.globals["namespace"] = Value::callable("namespace", [](Context& ctx, Args& a) {
    Value ns = dict_from_args(ctx, a, true);
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
  env.globals["cycler"] = Value::callable("cycler", cycler);
  env.globals["lipsum"] = Value::callable("lipsum", lipsum);
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

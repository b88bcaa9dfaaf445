#include "tfm/jinja/strings.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <utf8proc.h>

#include "tfm/core/error.h"

namespace tfm::jinja::pystr {

bool is_space(std::string_view ch) {
  if (ch.size() == 1) {
    const auto c = static_cast<unsigned char>(ch[0]);
    return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
  }
  return ch == "\xc2\x85" || ch == "\xc2\xa0" || ch == "\xe1\x9a\x80" ||
         (ch.size() == 3 && ch[0] == '\xe2' && ch[1] == '\x80' &&
          ((static_cast<unsigned char>(ch[2]) <= 0x8a) || ch[2] == '\xa8' || ch[2] == '\xa9' ||
           ch[2] == '\xaf')) ||
         ch == "\xe2\x81\x9f" || ch == "\xe3\x80\x80";
}

namespace {

utf8proc_int32_t code_point(std::string_view ch) {
  utf8proc_int32_t cp = -1;
  utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(ch.data()),
                   static_cast<utf8proc_ssize_t>(ch.size()), &cp);
  return cp;
}

}  // namespace

bool is_word(std::string_view ch) {
  if (ch.size() == 1) {
    const char c = ch[0];
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  const utf8proc_int32_t cp = code_point(ch);
  if (cp < 0) return false;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

bool is_decimal(std::string_view ch) {
  if (ch.size() == 1) return ch[0] >= '0' && ch[0] <= '9';
  const utf8proc_int32_t cp = code_point(ch);
  return cp >= 0 && utf8proc_category(cp) == UTF8PROC_CATEGORY_ND;
}

size_t find(std::string_view s, std::string_view sub, size_t from) {
  if (from > s.size()) return std::string_view::npos;
  const void* p = memmem(s.data() + from, s.size() - from, sub.data(), sub.size());
  return p ? static_cast<size_t>(static_cast<const char*>(p) - s.data()) : std::string_view::npos;
}

size_t rfind(std::string_view s, std::string_view sub) {
  if (sub.size() <= 64) return s.rfind(sub);  // at most 64 comparisons per position
  // Long needles: a forward search over both reversed.
  const std::string rs(s.rbegin(), s.rend()), rsub(sub.rbegin(), sub.rend());
  const size_t p = find(rs, rsub);
  return p == std::string_view::npos ? p : s.size() - p - sub.size();
}

std::string strip(std::string_view s, const Value& chars, bool left, bool right) {
  std::vector<std::string_view> set;  // sorted, so that a long `chars` costs a binary search per character
  const bool whitespace = chars.is_none() || chars.is_undefined();
  if (!whitespace) {
    if (!chars.is_string()) throw_error("strip arg must be None or str");
    const std::string& cs = chars.as_string();
    for (size_t i = 0; i < cs.size();) {
      const size_t next = utf8_next(cs, i);
      set.push_back(std::string_view(cs).substr(i, next - i));
      i = next;
    }
    std::sort(set.begin(), set.end());
  }
  auto strip_it = [&](std::string_view c) {
    return whitespace ? is_space(c) : std::binary_search(set.begin(), set.end(), c);
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e) {
      const size_t next = utf8_next(s, b);
      if (!strip_it(s.substr(b, next - b))) break;
      b = next;
    }
  if (right)
    while (e > b) {
      const size_t start = std::max(b, utf8_prev(s, e));
      if (!strip_it(s.substr(start, e - start))) break;
      e = start;
    }
  return std::string(s.substr(b, e - b));
}

namespace {

// Parts of a split are counted as the values they become, so that a split into millions of parts is refused
// before it is built.
void add_part(Context& ctx, std::vector<std::string>& out, std::string_view part) {
  ctx.check_size((out.size() + 1) * sizeof(Value));
  out.emplace_back(part);
}

// The code point at i, and whether it is whitespace.
bool space_at(std::string_view s, size_t i) {
  return is_space(s.substr(i, utf8_next(s, i) - i));
}

}  // namespace

std::vector<std::string> split(Context& ctx, std::string_view s, const Value& sep, int64_t maxsplit) {
  ctx.work(s.size());
  std::vector<std::string> out;
  if (sep.is_none() || sep.is_undefined()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && space_at(s, i)) i = utf8_next(s, i);
      if (i == s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        add_part(ctx, out, s.substr(i));  // Python keeps the remainder as it is
        break;
      }
      const size_t start = i;
      while (i < s.size() && !space_at(s, i)) i = utf8_next(s, i);
      add_part(ctx, out, s.substr(start, i - start));
    }
    return out;
  }
  if (!sep.is_string()) throw_error("must be str or None, not ", sep.type_name());
  const std::string& d = sep.as_string();
  if (d.empty()) throw_error("empty separator");
  size_t start = 0;
  while (true) {
    const size_t p = find(s, d, start);
    if (p == std::string_view::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) break;
    add_part(ctx, out, s.substr(start, p - start));
    start = p + d.size();
  }
  add_part(ctx, out, s.substr(start));
  return out;
}

std::vector<std::string> rsplit(Context& ctx, std::string_view s, const Value& sep, int64_t maxsplit) {
  if (maxsplit < 0) return split(ctx, s, sep, -1);
  ctx.work(s.size());
  std::vector<std::string> out;  // from the end, reversed at the end
  if (sep.is_none() || sep.is_undefined()) {
    size_t e = s.size();
    while (true) {
      while (e > 0 && space_at(s, utf8_prev(s, e))) e = utf8_prev(s, e);
      if (e == 0) break;
      if (static_cast<int64_t>(out.size()) == maxsplit) {
        add_part(ctx, out, s.substr(0, e));
        break;
      }
      size_t b = e;
      while (b > 0 && !space_at(s, utf8_prev(s, b))) b = utf8_prev(s, b);
      add_part(ctx, out, s.substr(b, e - b));
      e = b;
    }
  } else {
    if (!sep.is_string()) throw_error("must be str or None, not ", sep.type_name());
    const std::string& d = sep.as_string();
    if (d.empty()) throw_error("empty separator");
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t p = rfind(s.substr(0, end), d);
      if (p == std::string_view::npos) break;
      add_part(ctx, out, s.substr(p + d.size(), end - p - d.size()));
      end = p;
    }
    add_part(ctx, out, s.substr(0, end));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(Context& ctx, std::string_view s, bool keepends) {
  ctx.work(s.size());
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    size_t next = utf8_next(s, i);
    const std::string_view c = s.substr(i, next - i);
    const bool br = c == "\n" || c == "\r" || c == "\v" || c == "\f" || c == "\x1c" || c == "\x1d" ||
                    c == "\x1e" || c == "\xc2\x85" || c == "\xe2\x80\xa8" || c == "\xe2\x80\xa9";
    if (!br) {
      i = next;
      continue;
    }
    if (c == "\r" && next < s.size() && s[next] == '\n') ++next;
    add_part(ctx, out, s.substr(start, (keepends ? next : i) - start));
    start = i = next;
  }
  if (start < s.size()) add_part(ctx, out, s.substr(start));
  return out;
}

std::string replace(Context& ctx, std::string_view s, std::string_view from, std::string_view to,
                    int64_t count) {
  // The result's size is known from the number of replacements, which is counted first.
  ctx.work(s.size());
  const size_t limit = count < 0 ? SIZE_MAX : static_cast<size_t>(count);
  size_t n = 0;
  if (from.empty()) {
    n = std::min(utf8_length(s) + 1, limit);  // Python inserts `to` before every character and at the end
  } else {
    for (size_t p = find(s, from); p != std::string_view::npos && n < limit;
         p = find(s, from, p + from.size()))
      ++n;
  }
  const size_t growth = to.size() > from.size() ? to.size() - from.size() : 0;
  ctx.build(s.size() + n * growth);
  std::string out;
  out.reserve(s.size() + n * growth);
  size_t start = 0;
  for (size_t k = 0; k < n; ++k) {
    if (from.empty()) {
      out.append(to);
      if (start == s.size()) break;
      const size_t next = utf8_next(s, start);
      out.append(s.substr(start, next - start));
      start = next;
    } else {
      const size_t p = find(s, from, start);
      out.append(s.substr(start, p - start));
      out.append(to);
      start = p + from.size();
    }
  }
  out.append(s.substr(start));
  return out;
}

namespace {

// Applies a per-code-point mapping (Unicode simple case mapping, as utf8proc gives it).
template <typename Map>
std::string map_code_points(std::string_view s, Map map) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  auto n = static_cast<utf8proc_ssize_t>(s.size());
  while (n > 0) {
    utf8proc_int32_t cp;
    const utf8proc_ssize_t len = utf8proc_iterate(p, n, &cp);
    if (len <= 0) {  // not UTF-8: keep the byte
      out += static_cast<char>(*p);
      ++p;
      --n;
      continue;
    }
    json::append_utf8(out, static_cast<uint32_t>(map(cp)));
    p += len;
    n -= len;
  }
  return out;
}

bool is_cased(utf8proc_int32_t cp) {
  const auto cat = utf8proc_category(cp);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

}  // namespace

std::string upper(std::string_view s) {
  return map_code_points(s, utf8proc_toupper);
}

std::string lower(std::string_view s) {
  return map_code_points(s, utf8proc_tolower);
}

std::string title(std::string_view s) {
  bool prev_cased = false;
  return map_code_points(s, [&](utf8proc_int32_t cp) {
    const bool cased = is_cased(cp);
    const utf8proc_int32_t r = cased ? (prev_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp)) : cp;
    prev_cased = cased;
    return r;
  });
}

std::string swapcase(std::string_view s) {
  return map_code_points(s, [](utf8proc_int32_t cp) {
    const auto cat = utf8proc_category(cp);
    if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT) return utf8proc_tolower(cp);
    if (cat == UTF8PROC_CATEGORY_LL) return utf8proc_toupper(cp);
    return cp;
  });
}

std::string capitalize(std::string_view s) {
  bool first = true;
  return map_code_points(s, [&](utf8proc_int32_t cp) {
    const utf8proc_int32_t r = first ? utf8proc_totitle(cp) : utf8proc_tolower(cp);
    first = false;
    return r;
  });
}

namespace {

struct Spec {
  std::string_view fill = " ";
  char align = 0;
  char sign = '-';
  bool zero = false;
  bool grouping = false;
  int64_t width = -1;
  int64_t precision = -1;
  char type = 0;
};

Spec parse_spec(std::string_view spec) {
  Spec s;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  const size_t first = spec.empty() ? 0 : utf8_next(spec, 0);
  if (first < spec.size() && is_align(spec[first])) {
    s.fill = spec.substr(0, first);
    s.align = spec[first];
    i = first + 1;
  } else if (!spec.empty() && is_align(spec[0])) {
    s.align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) s.sign = spec[i++];
  if (i < spec.size() && spec[i] == '0') {
    s.zero = true;
    ++i;
  }
  auto read_int = [&] {
    int64_t v = 0;
    for (; i < spec.size() && spec[i] >= '0' && spec[i] <= '9'; ++i)
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, spec[i] - '0', &v))
        throw_error("Too many decimal digits in format string");
    return v;
  };
  if (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') s.width = read_int();
  if (i < spec.size() && spec[i] == ',') {
    s.grouping = true;
    ++i;
  }
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    s.precision = read_int();
  }
  if (i < spec.size()) s.type = spec[i++];
  if (i != spec.size()) throw_error("Invalid format specifier '", spec, "'");
  return s;
}

// `body` with `left` and `right` copies of `fill` around it, `sign_len` bytes of it (a sign) before the left
// fill; the size is checked before anything is built.
std::string surround(Context& ctx, std::string_view body, size_t left, size_t right, std::string_view fill,
                     size_t sign_len = 0) {
  size_t bytes;
  if (__builtin_mul_overflow(left + right, fill.size(), &bytes) ||
      __builtin_add_overflow(bytes, body.size(), &bytes))
    bytes = SIZE_MAX;
  ctx.build(bytes);
  std::string out(body.substr(0, sign_len));
  for (size_t k = 0; k < left; ++k) out += fill;
  out += body.substr(sign_len);
  for (size_t k = 0; k < right; ++k) out += fill;
  return out;
}

std::string pad(Context& ctx, std::string body, const Spec& s, char default_align) {
  const char align = s.align ? s.align : (s.zero ? '=' : default_align);
  const std::string_view fill = s.align ? s.fill : (s.zero ? "0" : " ");
  const auto len = static_cast<int64_t>(utf8_length(body));
  if (s.width <= len) return body;
  const auto n = static_cast<size_t>(s.width - len);
  if (align == '<') return surround(ctx, body, 0, n, fill);
  if (align == '>') return surround(ctx, body, n, 0, fill);
  if (align == '^') return surround(ctx, body, n / 2, n - n / 2, fill);
  const size_t sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
  return surround(ctx, body, n, 0, fill, sign);
}

std::string group_thousands(std::string digits) {
  const size_t dot = digits.find('.');
  std::string head = digits.substr(0, dot), tail = dot == std::string::npos ? "" : digits.substr(dot);
  std::string out;
  for (size_t i = 0; i < head.size(); ++i) {
    if (i && (head.size() - i) % 3 == 0) out += ',';
    out += head[i];
  }
  return out + tail;
}

// printf of one double with a precision; the size is checked before the text is built.
std::string printf_double(Context& ctx, char conversion, int64_t precision, double d) {
  if (precision > 100'000'000) throw_error("precision too big");
  const char format[] = {'%', '.', '*', conversion, 0};
  const int p = static_cast<int>(precision);
  const int n = std::snprintf(nullptr, 0, format, p, d);
  ctx.build(static_cast<size_t>(n));
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, p, d);
  out.pop_back();
  return out;
}

}  // namespace

std::string format_value(Context& ctx, const Value& v, std::string_view spec_text) {
  const Spec s = parse_spec(spec_text);
  if (v.is_string() || (!s.type && !v.is_number()) || s.type == 's') {
    if (s.type && s.type != 's') throw_error("Unknown format code '", s.type, "' for object of type 'str'");
    std::string body = v.str();
    if (s.precision >= 0) body.resize(utf8_offset(body, static_cast<size_t>(s.precision)));
    return pad(ctx, std::move(body), s, '<');
  }
  if (!v.is_number()) throw_error("unsupported format string passed to ", v.type_name(), ".__format__");
  std::string body;
  const bool negative = v.as_double() < 0;
  const char type = s.type ? s.type : (v.is_float() ? 0 : 'd');
  if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b') {
    if (v.is_float()) throw_error("Unknown format code '", type, "' for object of type 'float'");
    const int64_t i = v.as_int();
    const uint64_t m = i < 0 ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
    if (type == 'b') {
      body = m == 0 ? "0" : "";
      for (uint64_t k = m; k; k >>= 1) body.insert(body.begin(), static_cast<char>('0' + (k & 1)));
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf,
                    type == 'd'   ? "%llu"
                    : type == 'x' ? "%llx"
                    : type == 'X' ? "%llX"
                                  : "%llo",
                    static_cast<unsigned long long>(m));
      body = buf;
    }
  } else if (type == 0) {
    body = s.precision >= 0
               ? printf_double(ctx, 'g', std::max<int64_t>(s.precision, 1), std::fabs(v.as_double()))
               : json::python_float_repr(std::fabs(v.as_double()));
  } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' || type == 'G' ||
             type == '%') {
    const double d = std::fabs(v.as_double()) * (type == '%' ? 100 : 1);
    body = printf_double(ctx, type == '%' ? 'f' : type, s.precision >= 0 ? s.precision : 6, d);
    if (type == '%') body += '%';
  } else {
    throw_error("Unknown format code '", type, "' for object of type '", v.type_name(), "'");
  }
  if (s.grouping) body = group_thousands(body);
  if (negative)
    body = "-" + body;
  else if (s.sign == '+')
    body = "+" + body;
  else if (s.sign == ' ')
    body = " " + body;
  return pad(ctx, std::move(body), s, '>');
}

std::string format(Context& ctx, std::string_view fmt, const Args& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}')
        ++i;
      else
        throw_error("Single '}' encountered in format string");
      ctx.append(out, "}");
      continue;
    }
    if (c != '{') {
      ctx.append(out, fmt.substr(i, 1));
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      ctx.append(out, "{");
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string_view::npos) throw_error("Single '{' encountered in format string");
    std::string_view field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string_view spec;
    if (const size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    bool repr = false;
    if (field.size() >= 2 && field[field.size() - 2] == '!') {
      repr = field.back() == 'r';
      field = field.substr(0, field.size() - 2);
    }
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= args.positional.size())
        throw_error("Replacement index ", auto_index, " out of range");
      v = &args.positional[auto_index++];
    } else if (field[0] >= '0' && field[0] <= '9') {
      size_t k = 0;
      for (char d : field) {
        if (d < '0' || d > '9' || k > args.positional.size())
          throw_error("Replacement index ", field, " out of range");
        k = k * 10 + static_cast<size_t>(d - '0');
      }
      if (k >= args.positional.size()) throw_error("Replacement index ", k, " out of range");
      v = &args.positional[k];
    } else {
      for (const auto& [name, value] : args.keyword)
        if (name == field) v = &value;
      if (!v) throw_error("'", field, "'");
    }
    ctx.append(out, repr ? pad(ctx, v->repr(), parse_spec(spec), '<') : format_value(ctx, *v, spec));
  }
  return out;
}

std::string align(Context& ctx, std::string_view text, int64_t width, std::string_view fill, char how) {
  if (utf8_length(fill) != 1) throw_error("The fill character must be exactly one character long");
  const auto len = static_cast<int64_t>(utf8_length(text));
  if (width <= len) return std::string(text);
  const auto n = static_cast<size_t>(width - len);
  // Python's center puts the extra fill on the left when the padding and the width are both odd.
  const size_t left = how == '<' ? 0 : how == '^' ? n / 2 + (n & static_cast<size_t>(width) & 1) : n;
  const size_t sign = how == '=' && !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  return surround(ctx, text, left, n - left, fill, sign);
}

}  // namespace tfm::jinja::pystr

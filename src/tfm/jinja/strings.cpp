#include "tfm/jinja/strings.h"

#include <cmath>
#include <cstdio>

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

std::string strip(std::string_view s, const Value& chars, bool left, bool right) {
  const auto cs = utf8_chars(s);
  std::vector<std::string> set;
  const bool whitespace = chars.is_none() || chars.is_undefined();
  if (!whitespace) {
    if (!chars.is_string()) throw_error("strip arg must be None or str");
    set = utf8_chars(chars.as_string());
  }
  auto strip_it = [&](const std::string& c) {
    if (whitespace) return is_space(c);
    for (const auto& x : set)
      if (x == c) return true;
    return false;
  };
  size_t b = 0, e = cs.size();
  if (left)
    while (b < e && strip_it(cs[b])) ++b;
  if (right)
    while (e > b && strip_it(cs[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cs[i];
  return out;
}

std::vector<std::string> split(std::string_view s, const Value& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep.is_none() || sep.is_undefined()) {
    const auto cs = utf8_chars(s);
    size_t i = 0;
    while (true) {
      while (i < cs.size() && is_space(cs[i])) ++i;
      if (i == cs.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        std::string rest;
        for (size_t k = i; k < cs.size(); ++k) rest += cs[k];
        out.push_back(std::move(rest));  // Python keeps the remainder as it is
        break;
      }
      std::string word;
      while (i < cs.size() && !is_space(cs[i])) word += cs[i++];
      out.push_back(std::move(word));
    }
    return out;
  }
  if (!sep.is_string()) throw_error("must be str or None, not ", sep.type_name());
  const std::string& d = sep.as_string();
  if (d.empty()) throw_error("empty separator");
  size_t start = 0;
  while (true) {
    const size_t p = s.find(d, start);
    if (p == std::string_view::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) break;
    out.emplace_back(s.substr(start, p - start));
    start = p + d.size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const Value& sep, int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, -1);
  if (sep.is_none() || sep.is_undefined()) {
    std::vector<std::string> words = split(s, sep, -1);
    if (static_cast<int64_t>(words.size()) <= maxsplit + 1) return words;
    // Rebuild the head from the original text: everything before the last maxsplit words.
    const auto cs = utf8_chars(s);
    size_t e = cs.size();
    for (int64_t n = 0; n < maxsplit; ++n) {
      while (e > 0 && is_space(cs[e - 1])) --e;
      while (e > 0 && !is_space(cs[e - 1])) --e;
    }
    std::string head;
    for (size_t i = 0; i < e; ++i) head += cs[i];
    std::vector<std::string> out{strip(head, Value(nullptr), false, true)};
    out.insert(out.end(), words.end() - maxsplit, words.end());
    return out;
  }
  if (!sep.is_string()) throw_error("must be str or None, not ", sep.type_name());
  const std::string& d = sep.as_string();
  if (d.empty()) throw_error("empty separator");
  std::vector<std::string> out;
  size_t end = s.size();
  while (static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < d.size()) break;
    const size_t p = s.rfind(d, end - d.size());
    if (p == std::string_view::npos) break;
    out.insert(out.begin(), std::string(s.substr(p + d.size(), end - p - d.size())));
    end = p;
  }
  out.insert(out.begin(), std::string(s.substr(0, end)));
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  const auto cs = utf8_chars(s);
  std::string line;
  for (size_t i = 0; i < cs.size(); ++i) {
    const std::string& c = cs[i];
    const bool br = c == "\n" || c == "\r" || c == "\v" || c == "\f" || c == "\x1c" || c == "\x1d" ||
                    c == "\x1e" || c == "\xc2\x85" || c == "\xe2\x80\xa8" || c == "\xe2\x80\xa9";
    if (!br) {
      line += c;
      continue;
    }
    std::string end = c;
    if (c == "\r" && i + 1 < cs.size() && cs[i + 1] == "\n") {
      end += "\n";
      ++i;
    }
    if (keepends) line += end;
    out.push_back(std::move(line));
    line.clear();
  }
  if (!line.empty()) out.push_back(std::move(line));
  return out;
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every character and at the end.
    const auto cs = utf8_chars(s);
    int64_t n = 0;
    for (const auto& c : cs) {
      if (count < 0 || n++ < count) out += to;
      out += c;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t p = s.find(from, start);
    if (p == std::string_view::npos) break;
    out.append(s.substr(start, p - start));
    out.append(to);
    start = p + from.size();
    ++n;
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
  char fill = ' ';
  char align = 0;
  char sign = '-';
  bool zero = false;
  bool grouping = false;
  int width = -1;
  int precision = -1;
  char type = 0;
};

Spec parse_spec(std::string_view spec) {
  Spec s;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (spec.size() >= 2 && is_align(spec[1])) {
    s.fill = spec[0];
    s.align = spec[1];
    i = 2;
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
    int v = 0;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') v = v * 10 + (spec[i++] - '0');
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

std::string pad(std::string body, const Spec& s, char default_align) {
  const char align = s.align ? s.align : (s.zero ? '=' : default_align);
  const char fill = s.align ? s.fill : (s.zero ? '0' : ' ');
  const auto len = static_cast<int>(utf8_length(body));
  if (s.width <= len) return body;
  const size_t n = static_cast<size_t>(s.width - len);
  if (align == '<') return body + std::string(n, fill);
  if (align == '>') return std::string(n, fill) + body;
  if (align == '^') return std::string(n / 2, fill) + body + std::string(n - n / 2, fill);
  const size_t sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
  return body.substr(0, sign) + std::string(n, fill) + body.substr(sign);
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

}  // namespace

std::string format_value(const Value& v, std::string_view spec_text) {
  const Spec s = parse_spec(spec_text);
  if (v.is_string() || (!s.type && !v.is_number()) || s.type == 's') {
    if (s.type && s.type != 's') throw_error("Unknown format code '", s.type, "' for object of type 'str'");
    std::string body = v.str();
    if (s.precision >= 0) {
      const auto cs = utf8_chars(body);
      body.clear();
      for (size_t i = 0; i < cs.size() && static_cast<int>(i) < s.precision; ++i) body += cs[i];
    }
    return pad(body, s, '<');
  }
  if (!v.is_number()) throw_error("unsupported format string passed to ", v.type_name(), ".__format__");
  std::string body;
  const bool negative = v.as_double() < 0;
  const char type = s.type ? s.type : (v.is_float() ? 0 : 'd');
  char buf[512];
  if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b') {
    if (v.is_float()) throw_error("Unknown format code '", type, "' for object of type 'float'");
    const int64_t i = v.as_int();
    const uint64_t m = i < 0 ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
    if (type == 'b') {
      body = m == 0 ? "0" : "";
      for (uint64_t k = m; k; k >>= 1) body.insert(body.begin(), static_cast<char>('0' + (k & 1)));
    } else {
      std::snprintf(buf, sizeof buf,
                    type == 'd'   ? "%llu"
                    : type == 'x' ? "%llx"
                    : type == 'X' ? "%llX"
                                  : "%llo",
                    static_cast<unsigned long long>(m));
      body = buf;
    }
  } else if (type == 0) {
    body = json::python_float_repr(std::fabs(v.as_double()));
    if (s.precision >= 0) {
      std::snprintf(buf, sizeof buf, "%.*g", std::max(s.precision, 1), std::fabs(v.as_double()));
      body = buf;
    }
  } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' || type == 'G' ||
             type == '%') {
    const double d = std::fabs(v.as_double()) * (type == '%' ? 100 : 1);
    const int p = s.precision >= 0 ? s.precision : 6;
    const char conv[] = {'%', '.', '*', type == '%' ? 'f' : type, 0};
    std::snprintf(buf, sizeof buf, conv, p, d);
    body = buf;
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
  return pad(body, s, '>');
}

std::string format(std::string_view fmt, const Args& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}')
        ++i;
      else
        throw_error("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
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
      const size_t k = std::stoul(std::string(field));
      if (k >= args.positional.size()) throw_error("Replacement index ", k, " out of range");
      v = &args.positional[k];
    } else {
      for (const auto& [name, value] : args.keyword)
        if (name == field) v = &value;
      if (!v) throw_error("'", field, "'");
    }
    out += repr ? pad(v->repr(), parse_spec(spec), '<') : format_value(*v, spec);
  }
  return out;
}

}  // namespace tfm::jinja::pystr

#include "tfm/jinja/lexer.h"

#include <cstring>

#include "tfm/core/error.h"
#include "tfm/io/json.h"

namespace tfm::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

// Jinja2 reads the template with universal newlines.
std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes the body of a string literal with Python's escape rules.
std::string decode_string(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case 'a':
        out += '\a';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case '\n':
        break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          const int h = i + 1 + k < body.size() ? hex_value(body[i + 1 + k]) : -1;
          if (h < 0)
            throw_error("template syntax error at line ", line, ": truncated \\", c,
                        " escape in a string literal");
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        if (cp > 0x10ffff)
          throw_error("template syntax error at line ", line,
                      ": illegal Unicode character in a string literal");
        json::append_utf8(out, cp);
        i += n;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          uint32_t cp = 0;
          size_t k = 0;
          for (; k < 3 && i + k < body.size() && body[i + k] >= '0' && body[i + k] <= '7'; ++k)
            cp = cp * 8 + static_cast<uint32_t>(body[i + k] - '0');
          json::append_utf8(out, cp);
          i += k - 1;
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options) : s_(std::move(source)), opt_(options) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      const size_t start = find_tag(pos_);
      std::string text = s_.substr(pos_, start - pos_);
      if (start == s_.size()) {
        emit(Token::Type::text, std::move(text));
        pos_ = start;
        break;
      }
      const char kind = s_[start + 1];  // '{', '%' or '#'
      size_t after = start + 2;
      const char sign = after < s_.size() && (s_[after] == '-' || s_[after] == '+') ? s_[after] : 0;
      if (sign) ++after;
      strip_before_tag(text, sign, kind != '{');
      if (kind == '%' && is_raw_begin(after)) {
        emit(Token::Type::text, std::move(text));
        lex_raw();
        continue;
      }
      emit(Token::Type::text, std::move(text));
      pos_ = after;
      if (kind == '#')
        lex_comment();
      else
        lex_tag(kind == '%');
    }
    tokens_.push_back({Token::Type::end, "", line_});
    return std::move(tokens_);
  }

 private:
  std::string s_;
  LexerOptions opt_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < s_.size(); ++i)
      if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    return s_.size();
  }

  void emit(Token::Type type, std::string value) {
    if (type == Token::Type::text && value.empty()) return;
    const int line = line_;
    if (type == Token::Type::text)
      for (char c : value) line_ += c == '\n';
    tokens_.push_back({type, std::move(value), line});
  }

  // Counts the newlines of consumed source that produced no token.
  void skip_to(size_t end) {
    for (size_t i = pos_; i < end; ++i) line_ += s_[i] == '\n';
    pos_ = end;
  }

  void strip_before_tag(std::string& text, char sign, bool is_block) {
    // The newlines stripped still count for line numbers, which the consumed text accounts for.
    if (sign == '-') {
      size_t end = text.size();
      while (end > 0 && is_space(text[end - 1])) --end;
      for (size_t i = end; i < text.size(); ++i) line_ += text[i] == '\n';
      text.resize(end);
    } else if (sign != '+' && opt_.lstrip_blocks && is_block) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting_) {
        bool blank = true;
        for (size_t i = l_pos; i < text.size(); ++i) blank = blank && is_space(text[i]);
        if (blank) text.resize(l_pos);
      }
    }
    line_starting_ = false;
  }

  // After "{%" (and its sign): \s* raw \s* (-%}\s* | %}).
  bool is_raw_begin(size_t p) {
    while (p < s_.size() && is_space(s_[p])) ++p;
    if (s_.compare(p, 3, "raw") != 0 || (p + 3 < s_.size() && is_name_char(s_[p + 3]))) return false;
    p += 3;
    while (p < s_.size() && is_space(s_[p])) ++p;
    size_t end;
    if (s_.compare(p, 3, "-%}") == 0) {
      end = p + 3;
      while (end < s_.size() && is_space(s_[end])) ++end;
    } else if (s_.compare(p, 2, "%}") == 0) {
      end = p + 2;
    } else {
      return false;
    }
    skip_to(end);
    return true;
  }

  void lex_raw() {
    const int begin_line = line_;
    for (size_t i = pos_; i + 1 < s_.size(); ++i) {
      if (s_[i] != '{' || s_[i + 1] != '%') continue;
      size_t p = i + 2;
      const char sign = p < s_.size() && (s_[p] == '-' || s_[p] == '+') ? s_[p] : 0;
      if (sign) ++p;
      while (p < s_.size() && is_space(s_[p])) ++p;
      if (s_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      while (p < s_.size() && is_space(s_[p])) ++p;
      size_t end;
      if (!match_block_end(p, end)) continue;
      std::string text = s_.substr(pos_, i - pos_);
      line_starting_ = false;
      strip_before_tag(text, sign, true);
      emit(Token::Type::text, std::move(text));
      pos_ = i;
      skip_to(end);
      line_starting_ = s_[end - 1] == '\n';
      return;
    }
    throw_error("template syntax error at line ", begin_line, ": missing end of raw directive");
  }

  // "+%}", "-%}" and following whitespace, or "%}" and (with trim_blocks) one newline.
  bool match_block_end(size_t p, size_t& end) const {
    if (s_.compare(p, 3, "+%}") == 0) {
      end = p + 3;
    } else if (s_.compare(p, 3, "-%}") == 0) {
      end = p + 3;
      while (end < s_.size() && is_space(s_[end])) ++end;
    } else if (s_.compare(p, 2, "%}") == 0) {
      end = p + 2;
      if (opt_.trim_blocks && end < s_.size() && s_[end] == '\n') ++end;
    } else {
      return false;
    }
    return true;
  }

  void lex_comment() {
    const size_t close = s_.find("#}", pos_);
    if (close == std::string::npos)
      throw_error("template syntax error at line ", line_, ": missing end of comment tag");
    size_t end = close + 2;
    if (close > pos_ && s_[close - 1] == '-') {
      while (end < s_.size() && is_space(s_[end])) ++end;
    } else if (!(close > pos_ && s_[close - 1] == '+')) {
      if (opt_.trim_blocks && end < s_.size() && s_[end] == '\n') ++end;
    }
    skip_to(end);
    line_starting_ = s_[end - 1] == '\n';
  }

  void lex_tag(bool block) {
    emit(block ? Token::Type::block_begin : Token::Type::variable_begin, "");
    std::vector<char> brackets;
    while (true) {
      while (pos_ < s_.size() && is_space(s_[pos_])) skip_to(pos_ + 1);
      if (pos_ >= s_.size())
        throw_error("template syntax error at line ", line_,
                    ": unexpected end of template, the tag is not closed");
      if (brackets.empty()) {
        size_t end = 0;
        bool closed = false;
        if (block) {
          closed = match_block_end(pos_, end);
        } else if (s_.compare(pos_, 3, "-}}") == 0) {
          end = pos_ + 3;
          while (end < s_.size() && is_space(s_[end])) ++end;
          closed = true;
        } else if (s_.compare(pos_, 2, "}}") == 0) {
          end = pos_ + 2;
          closed = true;
        }
        if (closed) {
          emit(block ? Token::Type::block_end : Token::Type::variable_end, "");
          skip_to(end);
          line_starting_ = s_[end - 1] == '\n';
          return;
        }
      }
      lex_one(brackets);
    }
  }

  void lex_one(std::vector<char>& brackets) {
    const char c = s_[pos_];
    if (is_digit(c)) return lex_number();
    if (is_name_start(c)) {
      size_t end = pos_;
      while (end < s_.size() && is_name_char(s_[end])) ++end;
      emit(Token::Type::name, s_.substr(pos_, end - pos_));
      pos_ = end;
      return;
    }
    if (c == '\'' || c == '"') {
      size_t end = pos_ + 1;
      while (end < s_.size() && s_[end] != c) end += s_[end] == '\\' ? 2 : 1;
      if (end >= s_.size())
        throw_error("template syntax error at line ", line_, ": unterminated string literal");
      const int line = line_;
      tokens_.push_back({Token::Type::string,
                         decode_string(std::string_view(s_).substr(pos_ + 1, end - pos_ - 1), line), line});
      skip_to(end + 1);
      return;
    }
    static const char* const kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                             "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                             ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};
    for (const char* op : kOperators) {
      const size_t n = std::strlen(op);
      if (s_.compare(pos_, n, op) != 0) continue;
      if (n == 1 && (c == '(' || c == '[' || c == '{')) {
        brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (n == 1 && (c == ')' || c == ']' || c == '}')) {
        if (brackets.empty()) throw_error("template syntax error at line ", line_, ": unexpected '", c, "'");
        if (brackets.back() != c)
          throw_error("template syntax error at line ", line_, ": unexpected '", c, "', expected '",
                      brackets.back(), "'");
        brackets.pop_back();
      }
      emit(Token::Type::op, op);
      pos_ += n;
      return;
    }
    throw_error("template syntax error at line ", line_, ": unexpected char '", c, "'");
  }

  void lex_number() {
    std::string digits;
    size_t p = pos_;
    auto read_digits = [&] {
      while (p < s_.size() &&
             (is_digit(s_[p]) || (s_[p] == '_' && p + 1 < s_.size() && is_digit(s_[p + 1])))) {
        if (s_[p] != '_') digits += s_[p];
        ++p;
      }
    };
    read_digits();
    bool is_float = false;
    if (p + 1 < s_.size() && s_[p] == '.' && is_digit(s_[p + 1])) {
      is_float = true;
      digits += '.';
      ++p;
      read_digits();
    }
    if (p < s_.size() && (s_[p] == 'e' || s_[p] == 'E')) {
      size_t q = p + 1;
      if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) ++q;
      if (q < s_.size() && is_digit(s_[q])) {
        is_float = true;
        digits += 'e';
        digits.append(s_, p + 1, q - p - 1);
        p = q;
        read_digits();
      }
    }
    emit(is_float ? Token::Type::floating : Token::Type::integer, std::move(digits));
    pos_ = p;
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  std::string s = normalize_newlines(source);
  if (!options.keep_trailing_newline && !s.empty() && s.back() == '\n') s.pop_back();
  return Lexer(std::move(s), options).run();
}

}  // namespace tfm::jinja

#include "tfm/tokenizer/regex.h"

#include "tfm/core/error.h"

namespace tfm::tokenizer {

namespace {

// Oniguruma, which the Rust library uses, takes \w as Alphabetic, marks, decimal digits and connector
// punctuation, plus the Latin-1 superscripts and fractions; PCRE2 (before 10.43) as letters, digits and "_".
// \w and \W are spelt out so that both agree.
constexpr std::string_view kWordClass = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE})";

std::string with_onig_word_class(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 'w') {
        out += in_class ? std::string(kWordClass) : "[" + std::string(kWordClass) + "]";
      } else if (next == 'W' && !in_class) {
        out += "[^" + std::string(kWordClass) + "]";
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // a literal ] first
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

Regex::Regex(const std::string& source) : tfm::Regex(with_onig_word_class(source), source) {}

Pattern Pattern::from_json(const json::Value& v) {
  Pattern p;
  if (const auto* s = v.find("String")) {
    p.literal_ = s->as_string();
  } else if (const auto* r = v.find("Regex")) {
    p.regex_.emplace(r->as_string());
  } else {
    throw_error("pattern must be {\"String\": ...} or {\"Regex\": ...}, found ", json::dump(v));
  }
  return p;
}

std::vector<std::pair<size_t, size_t>> Pattern::find_all(std::string_view text) const {
  if (regex_) return regex_->find_all(text);
  std::vector<std::pair<size_t, size_t>> out;
  if (literal_.empty()) return out;
  for (size_t at = text.find(literal_); at != std::string_view::npos;
       at = text.find(literal_, at + literal_.size()))
    out.emplace_back(at, at + literal_.size());
  return out;
}

std::string Pattern::replace_all(std::string_view text, std::string_view content) const {
  std::string out;
  size_t last = 0;
  for (const auto& [s, e] : find_all(text)) {
    out.append(text.substr(last, s - last));
    out.append(content);
    last = e;
  }
  out.append(text.substr(last));
  return out;
}

}  // namespace tfm::tokenizer

#define PCRE2_CODE_UNIT_WIDTH 8
#include "tfm/tokenizer/regex.h"

#include <pcre2.h>

#include "tfm/core/error.h"

namespace tfm::tokenizer {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  std::string source;  // as tokenizer.json writes it, for messages
  ~Impl() { pcre2_code_free(code); }
};

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

std::string pcre2_message(int error) {
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(error, message, sizeof(message));
  return reinterpret_cast<const char*>(message);
}

}  // namespace

Regex::Regex(const std::string& source) {
  const std::string pattern = with_onig_word_class(source);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (!code) throw_error("invalid regex '", source, "' at offset ", offset, ": ", pcre2_message(error));
  auto impl = std::make_shared<Impl>();
  impl->code = code;
  impl->source = source;
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  impl_ = std::move(impl);
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  // One match-data block per thread: encoding from several threads shares a Regex.
  thread_local std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create(1, nullptr), &pcre2_match_data_free);
  std::vector<std::pair<size_t, size_t>> out;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc =
        pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    // PCRE2 gives up on a pattern that backtracks without bound (its match limit) rather than run for hours.
    check(rc >= 0, "regex '", impl_->source, "' failed on a text of ", text.size(),
          " bytes: ", pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.get());
    const size_t s = ov[0], e = ov[1];
    if (e > s) {
      out.emplace_back(s, e);
      start = e;
    } else {  // an empty match: step over one character
      if (s >= text.size()) break;
      start = s + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
    }
  }
  return out;
}

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

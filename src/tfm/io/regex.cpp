#define PCRE2_CODE_UNIT_WIDTH 8
#include "tfm/io/regex.h"

#include <pcre2.h>

#include <memory>

#include "tfm/core/error.h"

namespace tfm {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  std::string source;  // as the file wrote it, for messages
  ~Impl() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int error) {
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(error, message, sizeof(message));
  return reinterpret_cast<const char*>(message);
}

// One match-data block per thread: encoding from several threads shares a Regex.
pcre2_match_data* thread_match_data() {
  thread_local std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create(1, nullptr), &pcre2_match_data_free);
  return data.get();
}

}  // namespace

Regex::Regex(const std::string& pattern, std::string source) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  if (source.empty()) source = pattern;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!code) throw_error("invalid regex '", source, "' at offset ", offset, ": ", pcre2_message(error));
  auto impl = std::make_shared<Impl>();
  impl->code = code;
  impl->source = std::move(source);
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  impl_ = std::move(impl);
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  pcre2_match_data* data = thread_match_data();
  std::vector<std::pair<size_t, size_t>> out;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc =
        pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    // PCRE2 gives up on a pattern that backtracks without bound (its match limit) rather than run for hours.
    check(rc >= 0, "regex '", impl_->source, "' failed on a text of ", text.size(),
          " bytes: ", pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data);
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

bool Regex::full_match(std::string_view text) const {
  const int rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                             PCRE2_ANCHORED | PCRE2_ENDANCHORED, thread_match_data(), nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  check(rc >= 0, "regex '", impl_->source, "' failed on '", text, "': ", pcre2_message(rc));
  return true;
}

}  // namespace tfm

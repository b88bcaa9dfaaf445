#include "tfm/generate/streamer.h"

namespace tfm {
namespace {

bool is_continuation_byte(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

// Byte offset of code point `n` of a UTF-8 string (its size when n reaches the end).
size_t byte_offset(std::string_view s, size_t n) {
  size_t i = 0;
  while (i < s.size() && n > 0) {
    ++i;
    while (i < s.size() && is_continuation_byte(static_cast<unsigned char>(s[i]))) ++i;
    --n;
  }
  return i;
}

size_t code_points(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += !is_continuation_byte(static_cast<unsigned char>(c));
  return n;
}

// The last code point of a non-empty UTF-8 string (a broken sequence gives a value that is not CJK).
uint32_t last_code_point(std::string_view s) {
  size_t start = s.size() - 1;
  while (start > 0 && is_continuation_byte(static_cast<unsigned char>(s[start]))) --start;
  const auto lead = static_cast<unsigned char>(s[start]);
  const size_t len = s.size() - start;
  const size_t expected = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
  if (expected != len) return 0xFFFD;
  uint32_t cp = len == 1 ? lead : lead & (0xFF >> (len + 1));
  for (size_t i = start + 1; i < s.size(); ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[i]) & 0x3F);
  return cp;
}

}  // namespace

bool is_cjk_code_point(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

TextStreamer::TextStreamer(DecodeFn decode, OnText on_text, bool skip_prompt)
    : decode_(std::move(decode)), on_text_(std::move(on_text)), skip_prompt_(skip_prompt) {}

void TextStreamer::put(std::span<const int64_t> tokens) {
  if (skip_prompt_ && next_tokens_are_prompt_) {
    next_tokens_are_prompt_ = false;
    return;
  }
  token_cache_.insert(token_cache_.end(), tokens.begin(), tokens.end());
  const std::string text = decode_(token_cache_);
  const std::string_view view(text);
  const size_t from = byte_offset(view, print_len_);
  std::string_view printable;
  if (!text.empty() && text.back() == '\n') {  // after a newline, flush the cache
    printable = view.substr(from);
    token_cache_.clear();
    print_len_ = 0;
  } else if (!text.empty() && is_cjk_code_point(last_code_point(view))) {
    printable = view.substr(from);
    print_len_ += code_points(printable);
  } else {  // up to the last space: the last word may still change
    const size_t space = view.rfind(' ');
    const size_t until = space == std::string_view::npos ? 0 : space + 1;
    printable = until > from ? view.substr(from, until - from) : std::string_view();
    print_len_ += code_points(printable);
  }
  on_text_(printable, false);
}

void TextStreamer::end() {
  std::string rest;
  if (!token_cache_.empty()) {
    const std::string text = decode_(token_cache_);
    rest = text.substr(byte_offset(text, print_len_));
    token_cache_.clear();
    print_len_ = 0;
  }
  next_tokens_are_prompt_ = true;
  on_text_(rest, true);
}

}  // namespace tfm

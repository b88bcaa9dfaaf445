// Precompiled: SentencePiece's compiled normalization rules (T5, ALBERT, XLM-R). The base64 blob holds a
// little-endian u32 byte size, a darts double-array trie of that size whose values are offsets, and the
// replacement strings (NUL-terminated) those offsets point into. As in the Rust library, each grapheme
// shorter than 6 bytes is looked up whole, otherwise (or when it has no rule) its characters one by one; a
// lookup takes the shortest rule that is a prefix of the chunk.
#include <utf8proc.h>

#include <cstring>

#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/normalizers/normalizer.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

std::string base64_decode(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=' || c == '\n' || c == '\r') continue;
    const int v = value(c);
    check(v >= 0, "precompiled_charsmap is not base64 (found '", c, "')");
    buffer = (buffer << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xFF);
    }
  }
  return out;
}

class Precompiled : public Normalizer {
 public:
  explicit Precompiled(const std::string& blob) {
    check(blob.size() >= 4, "precompiled_charsmap is too short");
    uint32_t trie_bytes;
    std::memcpy(&trie_bytes, blob.data(), 4);
    check(trie_bytes % 4 == 0 && trie_bytes > 0 && 4 + static_cast<size_t>(trie_bytes) <= blob.size(),
          "precompiled_charsmap has a bad trie size ", trie_bytes);
    units_.resize(trie_bytes / 4);
    std::memcpy(units_.data(), blob.data() + 4, trie_bytes);
    normalized_ = blob.substr(4 + trie_bytes);
  }

  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t start = pos;
      pos = grapheme_end(text, pos);
      const std::string_view grapheme(text.data() + start, pos - start);
      if (grapheme.size() < 6)
        if (const char* rule = lookup(grapheme)) {
          out += rule;
          continue;
        }
      for (size_t c = 0; c < grapheme.size();) {
        const size_t len = utf8_length(static_cast<unsigned char>(grapheme[c]));
        const std::string_view ch = grapheme.substr(c, len);
        const char* rule = lookup(ch);
        if (rule)
          out += rule;
        else
          out.append(ch);
        c += len;
      }
    }
    text = std::move(out);
  }

 private:
  static size_t grapheme_end(std::string_view text, size_t pos) {
    utf8proc_int32_t state = 0;
    char32_t previous = next_code_point(text, pos);
    while (pos < text.size()) {
      size_t next = pos;
      const char32_t c = next_code_point(text, next);
      if (utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(previous),
                                           static_cast<utf8proc_int32_t>(c), &state))
        break;
      previous = c;
      pos = next;
    }
    return pos;
  }

  // The replacement of the shortest rule that is a prefix of chunk, or nullptr. Out-of-range trie walks
  // (a damaged blob) count as no rule.
  const char* lookup(std::string_view chunk) const {
    auto unit = [&](size_t i) -> uint32_t { return i < units_.size() ? units_[i] : 0; };
    auto offset = [](uint32_t u) -> size_t { return (u >> 10) << ((u & (1u << 9)) >> 6); };
    size_t node = 0;
    uint32_t u = unit(node);
    node ^= offset(u);
    for (unsigned char c : chunk) {
      if (c == 0) break;
      node ^= c;
      u = unit(node);
      if ((u & ((1u << 31) | 0xFF)) != c) return nullptr;
      node ^= offset(u);
      if ((u >> 8) & 1) {
        const size_t value = unit(node) & ((1u << 31) - 1);
        return value < normalized_.size() ? normalized_.c_str() + value : nullptr;
      }
    }
    return nullptr;
  }

  std::vector<uint32_t> units_;
  std::string normalized_;
};

// An identity normalizer, for files whose SentencePiece model had no rules.
class NoRules : public Normalizer {
 public:
  void normalize(std::string&) const override {}
};

}  // namespace

std::unique_ptr<Normalizer> make_precompiled(const json::Value& v) {
  const std::string map = string_or(v, "precompiled_charsmap", "");
  if (map.empty()) return std::make_unique<NoRules>();
  return std::make_unique<Precompiled>(base64_decode(map));
}

}  // namespace tfm::tokenizer

// A compiled PCRE2 pattern (UTF and Unicode properties on, JIT when available) for the Split pre-tokenizer
// and the Replace normalizer/decoder. The patterns in tokenizer.json are written for Oniguruma; the ones in
// use (\p{L}, lookahead, (?i:...)) mean the same in PCRE2.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/io/json.h"

namespace tfm::tokenizer {

class Regex {
 public:
  explicit Regex(const std::string& pattern);  // throws naming the pattern and the PCRE2 error
  // The [start, end) byte ranges of all non-overlapping matches, left to right (empty matches skipped).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// The "pattern" field of Split, Replace: {"String": "..."} (a literal) or {"Regex": "..."}.
class Pattern {
 public:
  static Pattern from_json(const json::Value& v);  // throws naming the bad field
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  // Every match replaced by `content`.
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::optional<Regex> regex_;
};

}  // namespace tfm::tokenizer

// The regular expressions of tokenizer.json (the Split pre-tokenizer, the Replace normalizer and decoder), written
// for Oniguruma, which the Rust library uses: run by PCRE2 (io/regex.h), in which the ones in use (\p{L},
// lookahead, (?i:...)) mean the same once \w is spelt out as Oniguruma reads it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/io/json.h"
#include "tfm/io/regex.h"

namespace tfm::tokenizer {

class Regex : public tfm::Regex {
 public:
  explicit Regex(const std::string& source);  // throws naming the pattern and the PCRE2 error
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

// Matches made of single characters of one class, for the pre-tokenizers that cut at such characters.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {

// Each character for which is_delimiter holds is its own match.
template <typename Predicate>
std::vector<std::pair<size_t, size_t>> char_matches(std::string_view text, Predicate is_delimiter) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    if (is_delimiter(next_code_point(text, pos))) out.emplace_back(start, pos);
  }
  return out;
}

}  // namespace tfm::tokenizer

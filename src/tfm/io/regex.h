// A compiled PCRE2 pattern (UTF and Unicode properties on, JIT when available), for patterns that come from
// downloaded files: PCRE2 gives up on a pattern that backtracks without bound (its match limit) and does not
// recurse on the stack, so a hostile pattern is an error, not a hang or a crash.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfm {

class Regex {
 public:
  // `pattern` in PCRE2's syntax; messages quote `source` (what the file wrote, when the pattern was rewritten
  // from another dialect), or the pattern. Throws naming the pattern and PCRE2's error.
  explicit Regex(const std::string& pattern, std::string source = {});
  // The [start, end) byte ranges of all non-overlapping matches in `text` (valid UTF-8), left to right (empty
  // matches skipped).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;
  // Whether the pattern matches the whole of `text` (Python's re.fullmatch).
  bool full_match(std::string_view text) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace tfm

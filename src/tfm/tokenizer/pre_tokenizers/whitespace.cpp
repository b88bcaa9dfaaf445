// Whitespace (runs of word characters or of other non-space characters) and WhitespaceSplit (cut at spaces).
#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"
#include "tfm/tokenizer/regex.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

class Whitespace : public PreTokenizer {
 public:
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    // \w+|[^\w\s]+ in Rust's regex crate, whose \w (Unicode TR18) differs from Oniguruma's.
    static const Regex words(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]+|)"
                             R"([^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\s]+)");
    split_pieces(
        pieces, [](std::string_view t) { return words.find_all(t); }, SplitBehavior::removed,
        /*invert=*/true);
  }
};

class WhitespaceSplit : public PreTokenizer {
 public:
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_pieces(pieces, whitespace_runs, SplitBehavior::removed);
  }

  static std::vector<std::pair<size_t, size_t>> whitespace_runs(std::string_view t) {
    std::vector<std::pair<size_t, size_t>> out;
    size_t pos = 0;
    while (pos < t.size()) {
      const size_t start = pos;
      if (!is_whitespace(next_code_point(t, pos))) continue;
      if (!out.empty() && out.back().second == start)
        out.back().second = pos;
      else
        out.emplace_back(start, pos);
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<PreTokenizer> make_whitespace(const json::Value&) {
  return std::make_unique<Whitespace>();
}
std::unique_ptr<PreTokenizer> make_whitespace_split(const json::Value&) {
  return std::make_unique<WhitespaceSplit>();
}

}  // namespace tfm::tokenizer

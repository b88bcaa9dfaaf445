// CharDelimiterSplit: cuts at one character, which is dropped.
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/pre_tokenizers/char_class_split.h"
#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"

namespace tfm::tokenizer {
namespace {

class CharDelimiterSplit : public PreTokenizer {
 public:
  explicit CharDelimiterSplit(char32_t delimiter) : delimiter_(delimiter) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_pieces(
        pieces,
        [&](std::string_view t) { return char_matches(t, [&](char32_t c) { return c == delimiter_; }); },
        SplitBehavior::removed);
  }

 private:
  char32_t delimiter_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_char_delimiter_split(const json::Value& v) {
  const std::string& d = required(v, "delimiter").as_string();
  size_t pos = 0;
  check(!d.empty() && next_code_point(d, pos) && pos == d.size(), "delimiter must be one character, found '",
        d, "'");
  pos = 0;
  return std::make_unique<CharDelimiterSplit>(next_code_point(d, pos));
}

}  // namespace tfm::tokenizer

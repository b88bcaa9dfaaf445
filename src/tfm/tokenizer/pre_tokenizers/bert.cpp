// BertPreTokenizer: cut at whitespace (dropped), then at each punctuation character (kept alone).
#include "tfm/tokenizer/pre_tokenizers/char_class_split.h"
#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"

namespace tfm::tokenizer {
namespace {

class BertPreTokenizer : public PreTokenizer {
 public:
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_pieces(
        pieces, [](std::string_view t) { return char_matches(t, is_whitespace); }, SplitBehavior::removed);
    split_pieces(
        pieces, [](std::string_view t) { return char_matches(t, is_bert_punctuation); },
        SplitBehavior::isolated);
  }
};

}  // namespace

std::unique_ptr<PreTokenizer> make_bert_pre_tokenizer(const json::Value&) {
  return std::make_unique<BertPreTokenizer>();
}

}  // namespace tfm::tokenizer

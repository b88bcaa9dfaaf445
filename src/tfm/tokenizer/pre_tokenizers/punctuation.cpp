// Punctuation: cuts at punctuation characters, kept as the behaviour says (isolated by default).
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/pre_tokenizers/char_class_split.h"
#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"

namespace tfm::tokenizer {
namespace {

class Punctuation : public PreTokenizer {
 public:
  explicit Punctuation(SplitBehavior behavior) : behavior_(behavior) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_pieces(
        pieces, [](std::string_view t) { return char_matches(t, is_bert_punctuation); }, behavior_);
  }

 private:
  SplitBehavior behavior_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_punctuation(const json::Value& v) {
  return std::make_unique<Punctuation>(parse_split_behavior(string_or(v, "behavior", "Isolated")));
}

}  // namespace tfm::tokenizer

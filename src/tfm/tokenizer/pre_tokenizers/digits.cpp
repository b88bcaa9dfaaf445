// Digits: numbers apart from the rest, each digit alone with individual_digits.
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/pre_tokenizers/char_class_split.h"
#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"

namespace tfm::tokenizer {
namespace {

class Digits : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_pieces(
        pieces, [](std::string_view t) { return char_matches(t, is_numeric); },
        individual_ ? SplitBehavior::isolated : SplitBehavior::contiguous);
  }

 private:
  bool individual_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_digits(const json::Value& v) {
  return std::make_unique<Digits>(bool_or(v, "individual_digits", false));
}

}  // namespace tfm::tokenizer

// Split: cuts at the matches of a literal or regex pattern; inverted, the matches are the parts kept.
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"
#include "tfm/tokenizer/regex.h"

namespace tfm::tokenizer {
namespace {

class Split : public PreTokenizer {
 public:
  Split(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

  void pre_tokenize(std::vector<Piece>& pieces) const override {
    split_pieces(
        pieces, [&](std::string_view t) { return pattern_.find_all(t); }, behavior_, invert_);
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_split(const json::Value& v) {
  return std::make_unique<Split>(Pattern::from_json(required(v, "pattern")),
                                 parse_split_behavior(required(v, "behavior").as_string()),
                                 bool_or(v, "invert", false));
}

}  // namespace tfm::tokenizer

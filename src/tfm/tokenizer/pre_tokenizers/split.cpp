// Split: cuts at the matches of a literal or regex pattern (or, inverted, keeps only the matches' gaps cut).
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
    split_pieces(pieces, [&](std::string_view t) { return invert_ ? gaps(t) : pattern_.find_all(t); }, behavior_);
  }

 private:
  // With invert, the text between matches is what counts as "the delimiter".
  std::vector<std::pair<size_t, size_t>> gaps(std::string_view text) const {
    std::vector<std::pair<size_t, size_t>> out;
    size_t last = 0;
    for (const auto& [s, e] : pattern_.find_all(text)) {
      if (s > last) out.emplace_back(last, s);
      last = e;
    }
    if (last < text.size()) out.emplace_back(last, text.size());
    return out;
  }

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

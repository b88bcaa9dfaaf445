// ByteLevel: optionally a leading space and the GPT-2 split, then every byte as its alphabet character.
#include "tfm/tokenizer/byte_level_alphabet.h"
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"
#include "tfm/tokenizer/regex.h"

namespace tfm::tokenizer {
namespace {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) regex_.emplace(kGpt2Pattern);
  }

  void pre_tokenize(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_)
      for (Piece& p : pieces)
        if (!p.text.empty() && p.text[0] != ' ') p.text.insert(0, " ");
    if (regex_)
      split_pieces(
          pieces, [&](std::string_view t) { return regex_->find_all(t); }, SplitBehavior::isolated);
    for (Piece& p : pieces) {
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      append_byte_level(mapped, p.text);
      p.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::optional<Regex> regex_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(const json::Value& v) {
  return std::make_unique<ByteLevel>(bool_or(v, "add_prefix_space", true), bool_or(v, "use_regex", true));
}

}  // namespace tfm::tokenizer

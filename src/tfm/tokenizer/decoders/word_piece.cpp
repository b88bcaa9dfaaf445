// WordPiece: "##" continuations glue to the previous token, other tokens get a space before them.
#include "tfm/tokenizer/decoders/decoder.h"
#include "tfm/tokenizer/json_fields.h"

namespace tfm::tokenizer {
namespace {

class WordPieceDecoder : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}

  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix_.size(), prefix_) == 0)
          t.erase(0, prefix_.size());
        else
          t.insert(0, " ");
      }
      if (cleanup_) t = clean_up_tokenization(std::move(t), /*do_not_rule=*/true);
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

}  // namespace

std::unique_ptr<Decoder> make_word_piece_decoder(const json::Value& v) {
  return std::make_unique<WordPieceDecoder>(string_or(v, "prefix", "##"), bool_or(v, "cleanup", true));
}

}  // namespace tfm::tokenizer

// CTC: repeated tokens collapse, pad tokens vanish and the word delimiter becomes a space.
#include "tfm/tokenizer/decoders/decoder.h"
#include "tfm/tokenizer/json_fields.h"

namespace tfm::tokenizer {
namespace {

class Ctc : public Decoder {
 public:
  Ctc(std::string pad, std::string delimiter, bool cleanup)
      : pad_(std::move(pad)), delimiter_(std::move(delimiter)), cleanup_(cleanup) {}

  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0 && tokens[i] == tokens[i - 1]) continue;
      std::string t = replace_all(tokens[i], pad_, "");
      if (cleanup_)
        t = replace_all(clean_up_tokenization(std::move(t), /*do_not_rule=*/true), delimiter_, " ");
      if (!t.empty()) out.push_back(std::move(t));
    }
    tokens = std::move(out);
  }

 private:
  std::string pad_, delimiter_;
  bool cleanup_;
};

}  // namespace

std::unique_ptr<Decoder> make_ctc(const json::Value& v) {
  return std::make_unique<Ctc>(string_or(v, "pad_token", "<pad>"), string_or(v, "word_delimiter_token", "|"),
                               bool_or(v, "cleanup", true));
}

}  // namespace tfm::tokenizer

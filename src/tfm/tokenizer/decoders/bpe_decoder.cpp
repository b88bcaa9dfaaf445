// BPEDecoder: the end-of-word suffix ("</w>") becomes a space, except in the last token.
#include "tfm/tokenizer/decoders/decoder.h"
#include "tfm/tokenizer/json_fields.h"

namespace tfm::tokenizer {
namespace {

class BpeDecoder : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}

  void decode_chain(std::vector<std::string>& tokens) const override {
    if (suffix_.empty()) return;
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = replace_all(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
    }
  }

 private:
  std::string suffix_;
};

}  // namespace

std::unique_ptr<Decoder> make_bpe_decoder(const json::Value& v) {
  return std::make_unique<BpeDecoder>(string_or(v, "suffix", "</w>"));
}

}  // namespace tfm::tokenizer

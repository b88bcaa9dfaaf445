#include "tfm/tokenizer/decoders/decoder.h"
#include "tfm/tokenizer/json_fields.h"

namespace tfm::tokenizer {
namespace {

class DecoderSequence : public Decoder {
 public:
  explicit DecoderSequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& s : steps_) s->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder_sequence(const json::Value& v) {
  std::vector<std::unique_ptr<Decoder>> steps;
  for (const json::Value& d : required(v, "decoders").as_array())
    if (auto s = make_decoder(d)) steps.push_back(std::move(s));
  return std::make_unique<DecoderSequence>(std::move(steps));
}

}  // namespace tfm::tokenizer

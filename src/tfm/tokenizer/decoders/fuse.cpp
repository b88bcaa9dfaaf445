// Fuse: all tokens into one.
#include "tfm/tokenizer/decoders/decoder.h"

namespace tfm::tokenizer {
namespace {

class Fuse : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

}  // namespace

std::unique_ptr<Decoder> make_fuse(const json::Value&) {
  return std::make_unique<Fuse>();
}

}  // namespace tfm::tokenizer

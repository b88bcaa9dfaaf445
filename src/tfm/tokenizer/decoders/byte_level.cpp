// ByteLevel: the alphabet characters back to bytes, read as UTF-8 with U+FFFD for invalid sequences. A token
// with a character outside the alphabet (an added token) keeps its own bytes.
#include "tfm/tokenizer/byte_level_alphabet.h"
#include "tfm/tokenizer/decoders/decoder.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      const size_t mark = bytes.size();
      size_t pos = 0;
      while (pos < t.size()) {
        const int b = char_to_byte(next_code_point(t, pos));
        if (b < 0) {
          bytes.resize(mark);
          bytes += t;
          break;
        }
        bytes += static_cast<char>(b);
      }
    }
    tokens.assign(1, to_valid_utf8(bytes));
  }
};

}  // namespace

std::unique_ptr<Decoder> make_byte_level_decoder(const json::Value&) {
  return std::make_unique<ByteLevelDecoder>();
}

}  // namespace tfm::tokenizer

// ByteFallback: runs of "<0xXX>" tokens become the text of their bytes, or one U+FFFD per byte when the run
// is not valid UTF-8.
#include "tfm/tokenizer/decoders/decoder.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte a "<0xXX>" token stands for, or -1.
int byte_of(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

class ByteFallback : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      if (to_valid_utf8(bytes) == bytes)
        out.push_back(bytes);
      else
        for (size_t i = 0; i < bytes.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
      bytes.clear();
    };
    for (std::string& t : tokens) {
      const int b = byte_of(t);
      if (b >= 0) {
        bytes += static_cast<char>(b);
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
};

}  // namespace

std::unique_ptr<Decoder> make_byte_fallback(const json::Value&) {
  return std::make_unique<ByteFallback>();
}

}  // namespace tfm::tokenizer

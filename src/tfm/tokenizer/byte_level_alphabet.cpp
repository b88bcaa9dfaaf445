#include "tfm/tokenizer/byte_level_alphabet.h"

#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

// Printable bytes stand for themselves; the others take code points 256, 257, ... in byte order.
std::array<char32_t, 256> make_code_points() {
  std::array<char32_t, 256> cp{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    cp[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return cp;
}

const std::array<char32_t, 256>& code_points() {
  static const std::array<char32_t, 256> cp = make_code_points();
  return cp;
}

}  // namespace

const std::array<std::string, 256>& byte_to_char() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    for (int b = 0; b < 256; ++b) append_utf8(t[b], code_points()[b]);
    return t;
  }();
  return table;
}

void append_byte_level(std::string& out, std::string_view text) {
  const auto& table = byte_to_char();
  for (char c : text) out += table[static_cast<unsigned char>(c)];
}

int char_to_byte(char32_t c) {
  static const std::array<int, 324> inverse = [] {
    std::array<int, 324> inv;
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) inv[code_points()[b]] = b;
    return inv;
  }();
  return c < inverse.size() ? inverse[c] : -1;
}

}  // namespace tfm::tokenizer

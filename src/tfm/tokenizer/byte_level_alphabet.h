// GPT-2's byte-level alphabet: each byte as a printable character, so any text becomes vocabulary symbols.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tfm::tokenizer {

// The UTF-8 form of the character standing for each byte.
const std::array<std::string, 256>& byte_to_char();
// Appends the byte-level form of text.
void append_byte_level(std::string& out, std::string_view text);
// The byte a character stands for, or -1 when it is not part of the alphabet.
int char_to_byte(char32_t c);

}  // namespace tfm::tokenizer

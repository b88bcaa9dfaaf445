// UTF-8 and Unicode character classes as the Rust tokenizers library sees them (char::is_whitespace, the
// general categories of char), and normalization forms through utf8proc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace tfm::tokenizer {

// Decodes the code point at text[pos] and advances pos. Input is valid UTF-8 (see to_valid_utf8).
char32_t next_code_point(std::string_view text, size_t& pos);
// The byte length of the UTF-8 sequence that starts with this lead byte.
inline size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
void append_utf8(std::string& out, char32_t c);

// Replaces every maximal invalid subsequence by U+FFFD, as Python's bytes.decode(errors="replace") and Rust's
// String::from_utf8_lossy do.
std::string to_valid_utf8(std::string_view bytes);

bool is_whitespace(char32_t c);  // Unicode White_Space (Rust char::is_whitespace)

// The [start, end) byte range of text without the code points is_space accepts at its start (left) and / or
// end (right).
std::pair<size_t, size_t> trimmed_range(std::string_view text, bool left, bool right,
                                        bool (*is_space)(char32_t));
bool is_alphabetic(char32_t c);        // letters, letter numbers (approximation of Rust char::is_alphabetic)
bool is_numeric(char32_t c);           // Nd, Nl, No
bool is_punctuation(char32_t c);       // general category P*
bool is_bert_punctuation(char32_t c);  // ASCII symbols or P* (BertPreTokenizer, BertNormalizer)
bool is_control(char32_t c);           // general category C*
bool is_mark(char32_t c);              // Mn, Mc, Me
bool is_nonspacing_mark(char32_t c);   // Mn
bool is_chinese_char(char32_t c);      // the CJK blocks BERT pads with spaces

enum class NormalForm { nfc, nfd, nfkc, nfkd };
std::string normalize_unicode(std::string_view text, NormalForm form);
// Lowercase character by character (Rust char::to_lowercase: no final-sigma rule), İ becoming "i̇".
std::string to_lowercase(std::string_view text);

}  // namespace tfm::tokenizer

// Added tokens: strings matched in the text before the model runs (special tokens such as "<|im_start|>",
// and user-added words), longest match first, with their lstrip / rstrip / single_word / normalized rules.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tfm/io/json.h"

namespace tfm::tokenizer {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;       // also swallow the whitespace before it
  bool rstrip = false;       // also swallow the whitespace after it
  bool normalized = true;    // matched in the normalized text rather than the raw text
  bool single_word = false;  // only where it is not part of a longer word

  static AddedToken from_json(const json::Value& v);  // an "added_tokens" entry of tokenizer.json
};

// A stretch of text, or one matched added token (id >= 0).
struct Segment {
  std::string_view text;
  int32_t id = -1;
};

class AddedVocabulary {
 public:
  // Adds a token; one with the same content is replaced. A token with `normalized` set is looked for as
  // `match_text` (its content through the normalizer), others as their content.
  void add(const AddedToken& token, std::string match_text);
  const AddedToken* find(std::string_view content) const;
  const AddedToken* find(int32_t id) const;
  // The token as the Rust library gives it back (decode, id_to_token): normalized tokens in normalized form.
  const std::string& text(const AddedToken& token) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

  // Splits text at the tokens whose `normalized` flag equals `normalized` (special ones only when
  // match_special). Segments are views of text.
  std::vector<Segment> split(std::string_view text, bool normalized, bool match_special) const;

 private:
  std::vector<AddedToken> tokens_;
  std::vector<std::string> match_;  // what split looks for, per token
  std::unordered_map<std::string, size_t> by_content_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::bitset<256> first_bytes_;  // lets split skip positions no token can start at
};

}  // namespace tfm::tokenizer

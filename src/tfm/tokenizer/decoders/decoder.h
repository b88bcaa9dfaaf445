// Decoders: turn the token strings of some ids back into text. Each one rewrites the whole list (as
// decode_chain in the Rust library); the results are then concatenated.
// make_decoder picks one by the "type" field of tokenizer.json.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/io/json.h"

namespace tfm::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const json::Value& v);  // nullptr for null

// Removes the spaces tokenization put before punctuation and contractions: the Rust library's cleanup
// (WordPiece, CTC decoders) also turns " do not" into " don't"; Transformers' clean_up_tokenization does not.
std::string clean_up_tokenization(std::string text, bool do_not_rule);

// Every occurrence of the literal `from` in `text` replaced by `to` (text unchanged when `from` is empty).
std::string replace_all(const std::string& text, std::string_view from, std::string_view to);

// The components, one per file.
std::unique_ptr<Decoder> make_byte_level_decoder(const json::Value& v);
std::unique_ptr<Decoder> make_metaspace_decoder(const json::Value& v);
std::unique_ptr<Decoder> make_replace_decoder(const json::Value& v);
std::unique_ptr<Decoder> make_byte_fallback(const json::Value& v);
std::unique_ptr<Decoder> make_fuse(const json::Value& v);
std::unique_ptr<Decoder> make_strip_decoder(const json::Value& v);
std::unique_ptr<Decoder> make_word_piece_decoder(const json::Value& v);
std::unique_ptr<Decoder> make_bpe_decoder(const json::Value& v);
std::unique_ptr<Decoder> make_ctc(const json::Value& v);
std::unique_ptr<Decoder> make_decoder_sequence(const json::Value& v);

}  // namespace tfm::tokenizer

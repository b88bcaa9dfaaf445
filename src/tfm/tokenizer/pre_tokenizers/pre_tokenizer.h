// Pre-tokenizers: split normalized text into the pieces the model tokenizes one at a time.
// One component per file; make_pre_tokenizer picks one by the "type" field of tokenizer.json.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/io/json.h"

namespace tfm::tokenizer {

struct Piece {
  std::string text;
  bool at_start = false;  // begins at offset 0 of the whole input (Metaspace's prepend_scheme "first")
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json::Value& v);  // nullptr for null

// How the matches of a splitting pattern are kept (SplitDelimiterBehavior in the Rust library).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
SplitBehavior parse_split_behavior(const std::string& name);

// Replaces each piece by its parts, cut at the [start, end) byte ranges `matches` returns for it: these are
// the delimiters, or with invert the text to keep (each match one part) while the rest is the delimiter.
using MatchFinder = std::function<std::vector<std::pair<size_t, size_t>>(std::string_view)>;
void split_pieces(std::vector<Piece>& pieces, const MatchFinder& matches, SplitBehavior behavior,
                  bool invert = false);

// The components, one per file.
std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(const json::Value& v);
std::unique_ptr<PreTokenizer> make_split(const json::Value& v);
std::unique_ptr<PreTokenizer> make_whitespace(const json::Value& v);
std::unique_ptr<PreTokenizer> make_whitespace_split(const json::Value& v);
std::unique_ptr<PreTokenizer> make_metaspace_pre_tokenizer(const json::Value& v);
std::unique_ptr<PreTokenizer> make_digits(const json::Value& v);
std::unique_ptr<PreTokenizer> make_punctuation(const json::Value& v);
std::unique_ptr<PreTokenizer> make_bert_pre_tokenizer(const json::Value& v);
std::unique_ptr<PreTokenizer> make_unicode_scripts(const json::Value& v);
std::unique_ptr<PreTokenizer> make_char_delimiter_split(const json::Value& v);
std::unique_ptr<PreTokenizer> make_pre_tokenizer_sequence(const json::Value& v);

}  // namespace tfm::tokenizer

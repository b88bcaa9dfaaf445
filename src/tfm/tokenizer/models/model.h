// Models: turn one pre-tokenized piece into token ids (BPE, Unigram, WordPiece, WordLevel), and own the
// vocabulary. make_model picks one by the "type" field of tokenizer.json.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/io/json.h"
#include "tfm/tokenizer/flat_hash.h"

namespace tfm::tokenizer {

// Token strings by id and ids by token string.
class Vocab {
  // The string of an id, for the id table.
  struct KeyOf {
    const std::vector<std::string>* tokens;
    std::string_view operator()(int32_t id) const { return (*tokens)[id]; }
  };
  KeyOf key_of() const { return KeyOf{&tokens_}; }

 public:
  Vocab() = default;
  // From (token, id) pairs; ids may come in any order and leave gaps. Throws on a negative id.
  explicit Vocab(std::vector<std::pair<std::string, int32_t>> entries);
  Vocab(Vocab&&) = default;
  Vocab& operator=(Vocab&&) = default;

  std::optional<int32_t> find(std::string_view token) const {
    const int32_t id = ids_.find(token, key_of());
    return id < 0 ? std::nullopt : std::optional<int32_t>(id);
  }
  // nullptr for an id with no token.
  const std::string* token(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < tokens_.size() && present_[id] ? &tokens_[id] : nullptr;
  }
  size_t size() const { return size_; }

 private:
  std::vector<std::string> tokens_;
  std::vector<uint8_t> present_;  // bytes, not bits: filled from several threads
  StringIdTable ids_;
  size_t size_ = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one piece.
  virtual void tokenize(std::string_view piece, std::vector<int32_t>& ids) const = 0;
  virtual const Vocab& vocab() const = 0;
};

// The model entry of tokenizer.json: its fields as a tree, but the vocab and merges as JSON text ("" when
// absent) from the document, which the models read straight into their tables (see tokenizer_json.h).
struct ModelJson {
  const json::Value& fields;
  std::string_view vocab;
  std::string_view merges;
  std::string_view document;    // for the line and column of a syntax error
  bool python_numbers = false;  // see TokenizerJson::python_numbers
};

std::unique_ptr<Model> make_model(const ModelJson& m);

// The components, one per file.
std::unique_ptr<Model> make_bpe(const ModelJson& m);
std::unique_ptr<Model> make_unigram(const ModelJson& m);
std::unique_ptr<Model> make_word_piece(const ModelJson& m);
std::unique_ptr<Model> make_word_level(const ModelJson& m);

// The {"token": id} vocabulary of BPE, WordPiece and WordLevel.
Vocab vocab_from_object(const ModelJson& m);
// The "<0x0A>" token a byte falls back to.
std::string byte_fallback_token(unsigned char b);

}  // namespace tfm::tokenizer

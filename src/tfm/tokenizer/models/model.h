// Models: turn one pre-tokenized piece into token ids (BPE, Unigram, WordPiece, WordLevel), and own the
// vocabulary. make_model picks one by the "type" field of tokenizer.json.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tfm/io/json.h"

namespace tfm::tokenizer {

// Token strings by id and ids by token string.
class Vocab {
 public:
  Vocab() = default;
  // From (token, id) pairs; ids may come in any order and leave gaps. Throws on a negative id.
  explicit Vocab(std::vector<std::pair<std::string, int32_t>> entries);
  Vocab(Vocab&&) = default;
  Vocab& operator=(Vocab&&) = default;
  Vocab(const Vocab&) = delete;  // the map's keys view the strings of tokens_

  std::optional<int32_t> find(std::string_view token) const {
    auto it = ids_.find(token);
    return it == ids_.end() ? std::nullopt : std::optional<int32_t>(it->second);
  }
  // nullptr for an id with no token.
  const std::string* token(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < tokens_.size() && present_[id] ? &tokens_[id] : nullptr;
  }
  size_t size() const { return ids_.size(); }

 private:
  std::vector<std::string> tokens_;
  std::vector<bool> present_;
  std::unordered_map<std::string_view, int32_t> ids_;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one piece.
  virtual void tokenize(std::string_view piece, std::vector<int32_t>& ids) const = 0;
  virtual const Vocab& vocab() const = 0;
};

std::unique_ptr<Model> make_model(const json::Value& v);

// The components, one per file.
std::unique_ptr<Model> make_bpe(const json::Value& v);
std::unique_ptr<Model> make_unigram(const json::Value& v);
std::unique_ptr<Model> make_word_piece(const json::Value& v);
std::unique_ptr<Model> make_word_level(const json::Value& v);

// A {"token": id} vocabulary, as BPE, WordPiece and WordLevel store it.
Vocab vocab_from_object(const json::Value& v);
// The "<0x0A>" token a byte falls back to.
std::string byte_fallback_token(unsigned char b);

}  // namespace tfm::tokenizer

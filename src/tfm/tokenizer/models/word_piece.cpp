// WordPiece: greedy longest match from the left, later pieces carrying the "##" prefix; a word with any
// part outside the vocabulary (or longer than max_input_chars_per_word) is one unk.
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/models/model.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

class WordPiece : public Model {
 public:
  WordPiece(Vocab vocab, int32_t unk_id, std::string prefix, size_t max_chars)
      : vocab_(std::move(vocab)), unk_id_(unk_id), prefix_(std::move(prefix)), max_chars_(max_chars) {}

  const Vocab& vocab() const override { return vocab_; }

  void tokenize(std::string_view word, std::vector<int32_t>& ids) const override {
    size_t chars = 0;
    for (size_t p = 0; p < word.size(); p += utf8_length(static_cast<unsigned char>(word[p]))) ++chars;
    if (chars > max_chars_) {
      ids.push_back(unk_id_);
      return;
    }
    std::vector<int32_t> pieces;
    std::string candidate;
    size_t start = 0;
    while (start < word.size()) {
      size_t end = word.size();
      std::optional<int32_t> found;
      while (start < end) {
        candidate = start > 0 ? prefix_ : "";
        candidate.append(word.substr(start, end - start));
        if ((found = vocab_.find(candidate))) break;
        do --end;  // back off one character
        while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80);
      }
      if (!found) {
        ids.push_back(unk_id_);
        return;
      }
      pieces.push_back(*found);
      start = end;
    }
    ids.insert(ids.end(), pieces.begin(), pieces.end());
  }

 private:
  Vocab vocab_;
  int32_t unk_id_;
  std::string prefix_;
  size_t max_chars_;
};

}  // namespace

std::unique_ptr<Model> make_word_piece(const ModelJson& m) {
  const json::Value& v = m.fields;
  Vocab vocab = vocab_from_object(m);
  const std::string unk = string_or(v, "unk_token", "[UNK]");
  auto unk_id = vocab.find(unk);
  check(unk_id.has_value(), "unk_token '", unk, "' is not in the vocabulary");
  return std::make_unique<WordPiece>(std::move(vocab), *unk_id,
                                     string_or(v, "continuing_subword_prefix", "##"),
                                     static_cast<size_t>(int_or(v, "max_input_chars_per_word", 100)));
}

}  // namespace tfm::tokenizer

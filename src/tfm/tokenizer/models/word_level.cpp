// WordLevel: each piece is one vocabulary entry or unk.
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/models/model.h"

namespace tfm::tokenizer {
namespace {

class WordLevel : public Model {
 public:
  WordLevel(Vocab vocab, std::optional<int32_t> unk_id, std::string unk)
      : vocab_(std::move(vocab)), unk_id_(unk_id), unk_(std::move(unk)) {}

  const Vocab& vocab() const override { return vocab_; }

  void tokenize(std::string_view piece, std::vector<int32_t>& ids) const override {
    if (auto id = vocab_.find(piece)) {
      ids.push_back(*id);
      return;
    }
    check(unk_id_.has_value(), "WordLevel: '", piece, "' is not in the vocabulary and unk_token '", unk_,
          "' is missing from it too");
    ids.push_back(*unk_id_);
  }

 private:
  Vocab vocab_;
  std::optional<int32_t> unk_id_;
  std::string unk_;
};

}  // namespace

std::unique_ptr<Model> make_word_level(const ModelJson& m) {
  Vocab vocab = vocab_from_object(m);
  std::string unk = string_or(m.fields, "unk_token", "<unk>");
  auto unk_id = vocab.find(unk);
  return std::make_unique<WordLevel>(std::move(vocab), unk_id, std::move(unk));
}

}  // namespace tfm::tokenizer

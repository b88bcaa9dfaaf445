#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"

namespace tfm::tokenizer {
namespace {

class PreTokenizerSequence : public PreTokenizer {
 public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& s : steps_) s->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer_sequence(const json::Value& v) {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  for (const json::Value& p : required(v, "pretokenizers").as_array())
    if (auto s = make_pre_tokenizer(p)) steps.push_back(std::move(s));
  return std::make_unique<PreTokenizerSequence>(std::move(steps));
}

}  // namespace tfm::tokenizer

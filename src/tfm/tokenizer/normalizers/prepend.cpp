// Prepend: puts a string in front of non-empty text (SentencePiece's "▁").
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/normalizers/normalizer.h"

namespace tfm::tokenizer {
namespace {

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

}  // namespace

std::unique_ptr<Normalizer> make_prepend(const json::Value& v) {
  return std::make_unique<Prepend>(required(v, "prepend").as_string());
}

}  // namespace tfm::tokenizer

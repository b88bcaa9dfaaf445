#include "tfm/tokenizer/normalizers/normalizer.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

class Lowercase : public Normalizer {
 public:
  void normalize(std::string& text) const override { text = to_lowercase(text); }
};

}  // namespace

std::unique_ptr<Normalizer> make_lowercase(const json::Value&) {
  return std::make_unique<Lowercase>();
}

}  // namespace tfm::tokenizer

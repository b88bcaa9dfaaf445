#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/normalizers/normalizer.h"

#include <vector>

namespace tfm::tokenizer {
namespace {

class NormalizerSequence : public Normalizer {
 public:
  explicit NormalizerSequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& s : steps_) s->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer_sequence(const json::Value& v) {
  std::vector<std::unique_ptr<Normalizer>> steps;
  for (const json::Value& n : required(v, "normalizers").as_array())
    if (auto s = make_normalizer(n)) steps.push_back(std::move(s));
  return std::make_unique<NormalizerSequence>(std::move(steps));
}

}  // namespace tfm::tokenizer

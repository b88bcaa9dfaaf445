// Strip: removes Unicode whitespace from the left and/or right end.
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/normalizers/normalizer.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {

namespace {

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    const auto [s, e] = trimmed_range(text, left_, right_, is_whitespace);
    text = text.substr(s, e - s);
  }

 private:
  bool left_, right_;
};

}  // namespace

std::unique_ptr<Normalizer> make_strip(const json::Value& v) {
  return std::make_unique<Strip>(bool_or(v, "strip_left", true), bool_or(v, "strip_right", true));
}

}  // namespace tfm::tokenizer

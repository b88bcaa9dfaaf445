// Replace: every match of a literal or regex pattern becomes `content`.
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/normalizers/normalizer.h"
#include "tfm/tokenizer/regex.h"

namespace tfm::tokenizer {
namespace {

class Replace : public Normalizer {
 public:
  Replace(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override { text = pattern_.replace_all(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

}  // namespace

std::unique_ptr<Normalizer> make_replace(const json::Value& v) {
  Pattern pattern = Pattern::from_json(required(v, "pattern"));  // fields in file order, for the errors
  return std::make_unique<Replace>(std::move(pattern), required(v, "content").as_string());
}

}  // namespace tfm::tokenizer

// Replace: every match of the pattern in each token becomes `content`.
#include "tfm/tokenizer/decoders/decoder.h"
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/regex.h"

namespace tfm::tokenizer {
namespace {

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = pattern_.replace_all(t, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

}  // namespace

std::unique_ptr<Decoder> make_replace_decoder(const json::Value& v) {
  Pattern pattern = Pattern::from_json(required(v, "pattern"));  // fields in file order, for the errors
  return std::make_unique<ReplaceDecoder>(std::move(pattern), required(v, "content").as_string());
}

}  // namespace tfm::tokenizer

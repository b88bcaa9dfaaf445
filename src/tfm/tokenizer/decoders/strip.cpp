// Strip: removes up to `start` leading and `stop` trailing copies of one character from each token.
#include "tfm/tokenizer/decoders/decoder.h"
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

class StripDecoder : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}

  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::u32string chars;
      for (size_t pos = 0; pos < t.size();) chars += next_code_point(t, pos);
      size_t first = 0, last = chars.size();
      while (first < start_ && first < chars.size() && chars[first] == content_) ++first;
      for (size_t i = 0; i < stop_ && last > first && chars[last - 1] == content_; ++i) --last;
      std::string out;
      for (size_t i = first; i < last; ++i) append_utf8(out, chars[i]);
      t = std::move(out);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

}  // namespace

std::unique_ptr<Decoder> make_strip_decoder(const json::Value& v) {
  const std::string& content = required(v, "content").as_string();
  size_t pos = 0;
  check(!content.empty(), "content must be one character");
  const char32_t c = next_code_point(content, pos);
  check(pos == content.size(), "content must be one character, found '", content, "'");
  return std::make_unique<StripDecoder>(c, static_cast<size_t>(int_or(v, "start", 0)),
                                        static_cast<size_t>(int_or(v, "stop", 0)));
}

}  // namespace tfm::tokenizer

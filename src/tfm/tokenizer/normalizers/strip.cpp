// Strip: removes Unicode whitespace from the left and/or right end.
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/normalizers/normalizer.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {

// The [start, end) byte range of text without its leading / trailing whitespace.
std::pair<size_t, size_t> whitespace_trimmed(std::string_view text, bool left, bool right) {
  size_t start = 0, end = text.size();
  if (left) {
    while (start < end) {
      size_t p = start;
      if (!is_whitespace(next_code_point(text, p))) break;
      start = p;
    }
  }
  if (right) {
    while (end > start) {
      size_t b = end - 1;
      while (b > start && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
      size_t p = b;
      if (!is_whitespace(next_code_point(text, p))) break;
      end = b;
    }
  }
  return {start, end};
}

namespace {

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    const auto [s, e] = whitespace_trimmed(text, left_, right_);
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

// StripAccents: drops combining marks (Mn, Mc, Me; meant to follow NFD / NFKD).
#include "tfm/tokenizer/normalizers/normalizer.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {

std::string without_marks(std::string_view text, bool (*is_dropped)(char32_t)) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const char32_t c = next_code_point(text, pos);
    if (!is_dropped(c)) out.append(text.substr(start, pos - start));
  }
  return out;
}

namespace {

class StripAccents : public Normalizer {
 public:
  void normalize(std::string& text) const override { text = without_marks(text, is_mark); }
};

}  // namespace

std::unique_ptr<Normalizer> make_strip_accents(const json::Value&) {
  return std::make_unique<StripAccents>();
}

}  // namespace tfm::tokenizer

// BertNormalizer: drops control characters, maps whitespace to ' ', pads CJK ideographs with spaces, strips
// accents and lowercases.
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/normalizers/normalizer.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {

std::string without_marks(std::string_view text, bool (*is_dropped)(char32_t));  // strip_accents.cpp

namespace {

class BertNormalizer : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool chinese, bool strip_accents, bool lowercase)
      : clean_text_(clean_text), chinese_(chinese), strip_accents_(strip_accents), lowercase_(lowercase) {}

  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t start = pos;
      const char32_t c = next_code_point(text, pos);
      if (clean_text_) {
        if (c == 0 || c == 0xFFFD || (c != '\t' && c != '\n' && c != '\r' && is_control(c))) continue;
        if (is_whitespace(c)) {
          out += ' ';
          continue;
        }
      }
      if (chinese_ && is_chinese_char(c)) {
        out += ' ';
        out.append(text, start, pos - start);
        out += ' ';
        continue;
      }
      out.append(text, start, pos - start);
    }
    if (strip_accents_)
      out = without_marks(normalize_unicode(out, NormalForm::nfd),
                          is_nonspacing_mark);  // Mn only, unlike StripAccents
    if (lowercase_) out = to_lowercase(out);
    text = std::move(out);
  }

 private:
  bool clean_text_, chinese_, strip_accents_, lowercase_;
};

}  // namespace

std::unique_ptr<Normalizer> make_bert_normalizer(const json::Value& v) {
  const bool lowercase = bool_or(v, "lowercase", true);
  // strip_accents null means "follow lowercase", as in the original BERT.
  return std::make_unique<BertNormalizer>(bool_or(v, "clean_text", true),
                                          bool_or(v, "handle_chinese_chars", true),
                                          bool_or(v, "strip_accents", lowercase), lowercase);
}

}  // namespace tfm::tokenizer

// NFC, NFD, NFKC, NFKD.
#include "tfm/tokenizer/normalizers/normalizer.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(NormalForm form) : form_(form) {}
  void normalize(std::string& text) const override { text = normalize_unicode(text, form_); }

 private:
  NormalForm form_;
};

}  // namespace

std::unique_ptr<Normalizer> make_unicode_normalizer(const json::Value& v) {
  const std::string& t = v.at("type").as_string();
  const NormalForm form = t == "NFC"    ? NormalForm::nfc
                          : t == "NFD"  ? NormalForm::nfd
                          : t == "NFKC" ? NormalForm::nfkc
                                        : NormalForm::nfkd;
  return std::make_unique<UnicodeForm>(form);
}

}  // namespace tfm::tokenizer

#include "tfm/tokenizer/normalizers/normalizer.h"

#include <string_view>

#include "tfm/tokenizer/json_fields.h"

namespace tfm::tokenizer {

std::unique_ptr<Normalizer> make_normalizer(const json::Value& v) {
  if (v.is_null()) return nullptr;
  return with_context("normalizer", v, [&]() -> std::unique_ptr<Normalizer> {
    const std::string& type = required(v, "type").as_string();
    if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") return make_unicode_normalizer(v);
    if (type == "Lowercase") return make_lowercase(v);
    if (type == "Strip") return make_strip(v);
    if (type == "StripAccents") return make_strip_accents(v);
    if (type == "Replace") return make_replace(v);
    if (type == "Prepend") return make_prepend(v);
    if (type == "Precompiled") return make_precompiled(v);
    if (type == "BertNormalizer") return make_bert_normalizer(v);
    if (type == "Sequence") return make_normalizer_sequence(v);
    throw_error("unknown normalizer type '", type, "'");
  });
}

}  // namespace tfm::tokenizer

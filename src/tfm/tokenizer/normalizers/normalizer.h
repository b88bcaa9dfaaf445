// Normalizers: the first stage, rewriting the text before it is split (Unicode forms, case, replacements).
// One component per file; make_normalizer picks one by the "type" field of tokenizer.json.
#pragma once

#include <memory>
#include <string>

#include "tfm/io/json.h"

namespace tfm::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// nullptr for a null value; throws for an unknown type or a bad field.
std::unique_ptr<Normalizer> make_normalizer(const json::Value& v);

// The components, one per file.
std::unique_ptr<Normalizer> make_unicode_normalizer(const json::Value& v);  // NFC, NFD, NFKC, NFKD
std::unique_ptr<Normalizer> make_lowercase(const json::Value& v);
std::unique_ptr<Normalizer> make_strip(const json::Value& v);
std::unique_ptr<Normalizer> make_strip_accents(const json::Value& v);
std::unique_ptr<Normalizer> make_replace(const json::Value& v);
std::unique_ptr<Normalizer> make_prepend(const json::Value& v);
std::unique_ptr<Normalizer> make_precompiled(const json::Value& v);
std::unique_ptr<Normalizer> make_bert_normalizer(const json::Value& v);
std::unique_ptr<Normalizer> make_normalizer_sequence(const json::Value& v);

}  // namespace tfm::tokenizer

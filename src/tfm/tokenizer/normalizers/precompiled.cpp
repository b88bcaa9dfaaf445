// Precompiled: SentencePiece's compiled normalization rules (a double-array trie of replacements).
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/normalizers/normalizer.h"

namespace tfm::tokenizer {

std::unique_ptr<Normalizer> make_precompiled(const json::Value&) {
  throw_error("the Precompiled normalizer (SentencePiece charsmap) is not supported yet");
}

}  // namespace tfm::tokenizer

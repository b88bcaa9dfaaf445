// UnicodeScripts: cuts where the Unicode script changes.
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"

namespace tfm::tokenizer {

std::unique_ptr<PreTokenizer> make_unicode_scripts(const json::Value&) {
  throw_error("the UnicodeScripts pre-tokenizer is not supported yet");
}

}  // namespace tfm::tokenizer

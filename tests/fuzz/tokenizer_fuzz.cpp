// tokenizer.json as the tokenizers library reads it, then a round trip of a few texts (and ids the vocabulary
// may lack): any text gives a working tokenizer or a tfm::Error.
#include <cstdint>
#include <string>

#include "tfm/core/error.h"
#include "tfm/tokenizer/tokenizer.h"
#include "tfm/tokenizer/tokenizer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tfm::tokenizer::Tokenizer;
  try {
    const Tokenizer tokenizer = Tokenizer::from_json(
        tfm::tokenizer::TokenizerJson::parse(std::string(reinterpret_cast<const char*>(data), size)));
    for (const char* text :
         {"Hello world! 123", " h\xc3\xa9llo  w\xc3\xb6rld\n\t<s></s>\xe4\xbd\xa0\xe5\xa5\xbd", ""}) {
      for (const bool special : {true, false}) {
        std::vector<int64_t> ids = tokenizer.encode(text, special);
        tokenizer.decode(ids, special);
        ids.insert(ids.end(), {-1, 0, 7, int64_t{1} << 40});
        tokenizer.decode(ids, special);
      }
    }
  } catch (const tfm::Error&) {
  }
  return 0;
}

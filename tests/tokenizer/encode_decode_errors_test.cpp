// Errors while encoding reach the caller as tfm::Error, from encode and from every thread of encode_batch;
// decoding takes what Transformers' decode takes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/error_of.h"
#include "tfm/tokenizer/tokenizer.h"
#include "tfm/tokenizer/tokenizer_json.h"

namespace tfm::tokenizer {
namespace {

using test_support::error_of;

// A pattern that backtracks without bound on a run of "a" not followed by the end: PCRE2 stops at its match
// limit, in a normalizer's Replace as in a Split pre-tokenizer.
TEST(EncodeErrors, ARunawayRegexIsAnErrorNamingIt) {
  const std::string vocab = R"("model": {"type": "WordLevel", "unk_token": "a", "vocab": {"a": 0, "b": 1}})";
  const std::vector<std::string> stages = {
      R"("normalizer": {"type": "Replace", "pattern": {"Regex": "(a+)+$"}, "content": "b"})",
      R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated",
          "invert": false})"};
  const std::vector<std::string> texts(16, std::string(40, 'a') + "b");
  for (const std::string& stage : stages) {
    const Tokenizer t = Tokenizer::from_json(TokenizerJson::parse("{" + stage + ", " + vocab + "}"));
    for (const std::string& message :
         {error_of([&] { t.encode(texts[0]); }), error_of([&] { t.encode_batch(texts); })}) {
      EXPECT_EQ(message, "regex '(a+)+$' failed on a text of 41 bytes: match limit exceeded") << stage;
    }
  }
}

// Transformers' decode leaves out an id that names no token; one that does not fit the tokenizers library's
// u32 ids is its Python binding's OverflowError.
TEST(DecodeErrors, IdsOutsideTheVocabularyAreLeftOutAndImpossibleIdsRefused) {
  const Tokenizer t = Tokenizer::from_json(TokenizerJson::parse(
      R"({"model": {"type": "WordLevel", "unk_token": "a", "vocab": {"a": 0, "b": 1}}})"));
  EXPECT_EQ(t.decode({0, 7, 4294967295, 1}), "a b");
  EXPECT_EQ(error_of([&] { t.decode({0, -1}); }), "token id -1: number too small to fit in target type");
  EXPECT_EQ(error_of([&] { t.decode({4294967296}); }),
            "token id 4294967296: number too large to fit in target type");
}

}  // namespace
}  // namespace tfm::tokenizer

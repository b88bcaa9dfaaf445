// The hand-written tokenizers of tests/tokenizer/families (one per family tfm does not ship: Unigram,
// WordPiece, SentencePiece-style BPE with byte fallback, classic and byte-level BPE, WordLevel, the split
// pre-tokenizers, a BPE file written with escapes and fields out of order) against the Rust tokenizers
// library and, where the folder has a tokenizer_config.json, Transformers' AutoTokenizer.
#include <gtest/gtest.h>

#include <filesystem>

#include "test_paths.h"
#include "tfm/tokenizer/tokenizer.h"

namespace tfm::tokenizer {
namespace {

using testing::ids_of;

void expect_matches(const Tokenizer& tok, const json::Value& rec) {
  const json::Value& texts = rec.at("texts");
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i].as_string();
    SCOPED_TRACE("text " + std::to_string(i) + ": " + json::dump(texts[i]));
    EXPECT_EQ(tok.encode(text, true), ids_of(rec.at("with_special")[i]));
    EXPECT_EQ(tok.encode(text, false), ids_of(rec.at("without_special")[i]));
    const auto ids = ids_of(rec.at("with_special")[i]);
    EXPECT_EQ(tok.decode(ids, false), rec.at("decoded")[i].as_string());
    EXPECT_EQ(tok.decode(ids, true), rec.at("decoded_skip")[i].as_string());
  }
}

class Family : public ::testing::TestWithParam<std::string> {
 protected:
  std::string dir() const { return testing::tests_dir() + "/families/" + GetParam(); }
  json::Value rec() const { return testing::reference("family_" + GetParam()); }
};

TEST_P(Family, MatchesRustLibrary) {
  expect_matches(Tokenizer::from_file(dir() + "/tokenizer.json"), rec().at("tokenizers"));
}

TEST_P(Family, MatchesTransformers) {
  const json::Value r = rec();
  if (!r.contains("transformers")) GTEST_SKIP() << "no tokenizer_config.json in this family";
  const auto tok = AutoTokenizer::from_pretrained(dir());
  expect_matches(tok, r.at("transformers"));
  EXPECT_EQ(tok.all_special_ids(), ids_of(r.at("transformers").at("special").at("all_special_ids")));
}

INSTANTIATE_TEST_SUITE_P(Families, Family,
                         ::testing::Values("unigram_metaspace", "unigram_bytes", "wordpiece_bert",
                                           "bpe_byte_fallback", "byte_level_bpe", "bpe_suffix",
                                           "word_level_splits", "metaspace_always", "unigram_precompiled",
                                           "class_llama_first", "class_llama_no_prefix", "class_gemma",
                                           "class_gpt2", "class_qwen2", "class_gpt_neox",
                                           "bpe_escaped_merges"));

}  // namespace
}  // namespace tfm::tokenizer

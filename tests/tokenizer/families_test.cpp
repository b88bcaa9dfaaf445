// The hand-written tokenizers of tests/tokenizer/families (one per family tfm does not ship: Unigram,
// WordPiece, SentencePiece-style BPE with byte fallback, classic and byte-level BPE, WordLevel, the split
// pre-tokenizers, a BPE file written with escapes and fields out of order) against the Rust tokenizers
// library and, where the folder has a tokenizer_config.json, Transformers' AutoTokenizer.
#include <gtest/gtest.h>

#include <algorithm>
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
  const json::Value& expected = r.at("transformers");
  expect_matches(tok, expected);
  EXPECT_EQ(tok.all_special_ids(), ids_of(expected.at("special").at("all_special_ids")));
  // Id lists encoding never yields (single ids, a run of ids, every special id): where a class's own decode
  // steps show (CLIP's suffixes, Whisper's timestamps and prompts).
  for (size_t i = 0; i < expected.at("decode_ids").size(); ++i) {
    SCOPED_TRACE("ids " + json::dump(expected.at("decode_ids")[i]));
    const auto ids = ids_of(expected.at("decode_ids")[i]);
    EXPECT_EQ(tok.decode(ids), expected.at("decode_ids_text")[i].as_string());
    EXPECT_EQ(tok.decode(ids, true), expected.at("decode_ids_text_skip")[i].as_string());
  }
}

// Every folder of tests/tokenizer/families, so a new family needs no change here.
std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(testing::tests_dir() + "/families"))
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Families, Family, ::testing::ValuesIn(family_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace tfm::tokenizer

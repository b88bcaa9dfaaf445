// Qwen3 and Llama 2 against Transformers' AutoTokenizer and the Rust tokenizers library, over the corpus of
// tests/fixtures/make_tokenizer_references.py.
#include <gtest/gtest.h>

#include "support/test_assets.h"
#include "test_paths.h"
#include "tfm/tokenizer/tokenizer.h"

namespace tfm::tokenizer {
namespace {

using test_support::shipped_tokenizer;
using testing::ids_of;

// Every text of the corpus: ids with and without special tokens, and the decoded text.
void expect_matches_corpus(const Tokenizer& tok, const json::Value& rec) {
  const json::Value& texts = rec.at("texts");
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i].as_string();
    SCOPED_TRACE("text " + std::to_string(i) + ": " + json::dump(texts[i]));
    const auto with_special = tok.encode(text, true);
    EXPECT_EQ(with_special, ids_of(rec.at("with_special")[i]));
    EXPECT_EQ(tok.encode(text, false), ids_of(rec.at("without_special")[i]));
    const auto reference_ids = ids_of(rec.at("with_special")[i]);
    EXPECT_EQ(tok.decode(reference_ids, false), rec.at("decoded")[i].as_string());
    EXPECT_EQ(tok.decode(reference_ids, true), rec.at("decoded_skip")[i].as_string());
  }
}

class ShippedTokenizer : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedTokenizer, MatchesTransformersOnCorpus) {
  const auto tok = AutoTokenizer::from_pretrained(shipped_tokenizer(GetParam()));
  expect_matches_corpus(tok, testing::reference(GetParam()).at("transformers"));
}

TEST_P(ShippedTokenizer, MatchesRustLibraryOnCorpus) {
  const auto tok = Tokenizer::from_file(shipped_tokenizer(GetParam()) + "/tokenizer.json");
  expect_matches_corpus(tok, testing::reference(GetParam()).at("tokenizers"));
}

TEST_P(ShippedTokenizer, BatchEncodingMatchesSingle) {
  const auto tok = AutoTokenizer::from_pretrained(shipped_tokenizer(GetParam()));
  const json::Value rec = testing::reference(GetParam()).at("transformers");
  std::vector<std::string> texts;
  for (const json::Value& t : rec.at("texts").as_array()) texts.push_back(t.as_string());
  const auto batch = tok.encode_batch(texts);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(batch[i], ids_of(rec.at("with_special")[i])) << i;
}

TEST_P(ShippedTokenizer, InvalidUtf8IsReadWithReplacementCharacters) {
  const auto tok = AutoTokenizer::from_pretrained(shipped_tokenizer(GetParam()));
  const json::Value rec = testing::reference(GetParam()).at("transformers");
  for (size_t i = 0; i < rec.at("invalid_utf8_hex").size(); ++i) {
    const std::string& hex = rec.at("invalid_utf8_hex")[i].as_string();
    std::string bytes;
    for (size_t k = 0; k + 1 < hex.size(); k += 2)
      bytes += static_cast<char>(std::stoi(hex.substr(k, 2), nullptr, 16));
    EXPECT_EQ(tok.encode(bytes), ids_of(rec.at("invalid_utf8_ids")[i])) << hex;
  }
}

TEST_P(ShippedTokenizer, DecodesArbitraryIds) {
  const auto tok = AutoTokenizer::from_pretrained(shipped_tokenizer(GetParam()));
  const json::Value rec = testing::reference(GetParam()).at("transformers");
  for (size_t i = 0; i < rec.at("decode_ids").size(); ++i) {
    const auto ids = ids_of(rec.at("decode_ids")[i]);
    EXPECT_EQ(tok.decode(ids), rec.at("decode_ids_text")[i].as_string())
        << json::dump(rec.at("decode_ids")[i]);
    EXPECT_EQ(tok.decode(ids, true), rec.at("decode_ids_text_skip")[i].as_string());
  }
}

TEST_P(ShippedTokenizer, LongText) {
  const auto tok = AutoTokenizer::from_pretrained(shipped_tokenizer(GetParam()));
  const json::Value rec = testing::reference(GetParam()).at("transformers");
  EXPECT_EQ(tok.encode(rec.at("long_text").as_string()), ids_of(rec.at("long_ids")));
}

std::optional<int64_t> optional_id(const json::Value& v) {
  return v.is_null() ? std::nullopt : std::optional<int64_t>(v.as_int());
}
std::optional<std::string> optional_string(const json::Value& v) {
  return v.is_null() ? std::nullopt : std::optional<std::string>(v.as_string());
}

TEST_P(ShippedTokenizer, SpecialTokensAndVocabulary) {
  const auto tok = AutoTokenizer::from_pretrained(shipped_tokenizer(GetParam()));
  const json::Value rec = testing::reference(GetParam()).at("transformers");
  const json::Value& s = rec.at("special");
  EXPECT_EQ(tok.bos_token(), optional_string(s.at("bos_token")));
  EXPECT_EQ(tok.eos_token(), optional_string(s.at("eos_token")));
  EXPECT_EQ(tok.pad_token(), optional_string(s.at("pad_token")));
  EXPECT_EQ(tok.unk_token(), optional_string(s.at("unk_token")));
  EXPECT_EQ(tok.bos_token_id(), optional_id(s.at("bos_token_id")));
  EXPECT_EQ(tok.eos_token_id(), optional_id(s.at("eos_token_id")));
  EXPECT_EQ(tok.pad_token_id(), optional_id(s.at("pad_token_id")));
  EXPECT_EQ(tok.unk_token_id(), optional_id(s.at("unk_token_id")));
  EXPECT_EQ(tok.all_special_ids(), ids_of(s.at("all_special_ids")));
  EXPECT_EQ(static_cast<int64_t>(tok.vocab_size()), s.at("vocab_size").as_int());
  EXPECT_EQ(static_cast<int64_t>(tok.size()), s.at("len").as_int());
  EXPECT_EQ(tok.model_max_length(), s.at("model_max_length").as_int());

  std::vector<std::string> tokens;
  for (const json::Value& t : rec.at("convert_tokens").as_array()) tokens.push_back(t.as_string());
  const auto ids = tok.convert_tokens_to_ids(tokens);
  for (size_t i = 0; i < tokens.size(); ++i)
    EXPECT_EQ(ids[i], optional_id(rec.at("convert_tokens_to_ids")[i])) << tokens[i];
  const auto back = tok.convert_ids_to_tokens(ids_of(rec.at("convert_ids")));
  for (size_t i = 0; i < back.size(); ++i)
    EXPECT_EQ(back[i], optional_string(rec.at("convert_ids_to_tokens")[i]));
}

TEST_P(ShippedTokenizer, ExposesTheConfig) {
  const auto tok = AutoTokenizer::from_pretrained(shipped_tokenizer(GetParam()));
  const json::Value file = json::parse_file(shipped_tokenizer(GetParam()) + "/tokenizer_config.json");
  EXPECT_EQ(tok.config().at("tokenizer_class"), file.at("tokenizer_class"));
  EXPECT_EQ(tok.config().contains("chat_template"), file.contains("chat_template"));
}

INSTANTIATE_TEST_SUITE_P(Shipped, ShippedTokenizer, ::testing::Values("qwen3", "llama2"));

}  // namespace
}  // namespace tfm::tokenizer

// Each normalizer, pre-tokenizer and decoder on its own against the Rust library's output for the same
// configuration (tests/fixtures/make_tokenizer_stage_references.py).
#include <gtest/gtest.h>

#include "test_paths.h"
#include "tfm/tokenizer/decoders/decoder.h"
#include "tfm/tokenizer/normalizers/normalizer.h"
#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"
#include "tfm/tokenizer/regex.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

std::vector<std::string> strings(const json::Value& list) {
  std::vector<std::string> out;
  for (const json::Value& s : list.as_array()) out.push_back(s.as_string());
  return out;
}

TEST(Stages, Normalizers) {
  const json::Value rec = testing::reference("stages");
  for (const json::Value& entry : rec.at("normalizers").as_array()) {
    SCOPED_TRACE(json::dump(entry.at("config")));
    const auto n = make_normalizer(entry.at("config"));
    for (const json::Value& c : entry.at("cases").as_array()) {
      std::string text = c[0].as_string();
      n->normalize(text);
      EXPECT_EQ(text, c[1].as_string()) << json::dump(c[0]);
    }
  }
}

TEST(Stages, PreTokenizers) {
  const json::Value rec = testing::reference("stages");
  for (const json::Value& entry : rec.at("pre_tokenizers").as_array()) {
    SCOPED_TRACE(json::dump(entry.at("config")));
    const auto p = make_pre_tokenizer(entry.at("config"));
    for (const json::Value& c : entry.at("cases").as_array()) {
      std::vector<Piece> pieces{{c[0].as_string(), true}};
      p->pre_tokenize(pieces);
      std::vector<std::string> got;
      for (const Piece& piece : pieces)
        if (!piece.text.empty()) got.push_back(piece.text);
      EXPECT_EQ(got, strings(c[1])) << json::dump(c[0]);
    }
  }
}

TEST(Stages, Decoders) {
  const json::Value rec = testing::reference("stages");
  for (const json::Value& entry : rec.at("decoders").as_array()) {
    SCOPED_TRACE(json::dump(entry.at("config")));
    const auto d = make_decoder(entry.at("config"));
    for (const json::Value& c : entry.at("cases").as_array()) {
      std::vector<std::string> tokens = strings(c[0]);
      d->decode_chain(tokens);
      std::string text;
      for (const std::string& t : tokens) text += t;
      EXPECT_EQ(text, c[1].as_string()) << json::dump(c[0]);
    }
  }
}

// Python's bytes.decode("utf-8", errors="replace") on the same bytes.
TEST(Unicode, InvalidUtf8BecomesReplacementCharacters) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(to_valid_utf8("abc"), "abc");
  EXPECT_EQ(to_valid_utf8("a\xFF"
                          "b"),
            "a" + r + "b");
  EXPECT_EQ(to_valid_utf8("\xE2\x82"), r);              // a truncated sequence is one replacement
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80"), r + r + r);  // surrogates: each byte
  EXPECT_EQ(to_valid_utf8("\xC0\xAF"), r + r);          // overlong
  EXPECT_EQ(to_valid_utf8("\xF0\x9F\x98"
                          "x"),
            r + "x");
  EXPECT_EQ(to_valid_utf8("\xF4\x90\x80\x80"), r + r + r + r);
}

TEST(Regex, WordClassIncludesMarksAsOniguruma) {
  const Regex words(R"(\w+)");
  const auto m = words.find_all("e\xCC\x81t\xC3\xA9 x_1");  // e + combining acute, "té", "x_1"
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], std::make_pair(size_t{0}, size_t{6}));
}

}  // namespace
}  // namespace tfm::tokenizer

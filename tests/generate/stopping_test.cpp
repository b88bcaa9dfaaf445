#include "tfm/generation/stopping.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include "tfm/core/error.h"

namespace tfm {
namespace {

// Token i decodes to pieces[i].
testing::FakeByteDecoder decoder(const std::vector<std::string>& pieces) {
  testing::FakeByteDecoder d;
  for (size_t i = 0; i < pieces.size(); ++i) d.bytes[static_cast<int64_t>(i)] = pieces[i];
  return d;
}

const std::vector<std::string> kPieces = {
    "st",   "op",   "opera", "sto", "pper", "las", "topper",   "s",   "to",
    "pped", "stop", "at",    "x",   "a",    " ",   "\xE5\xA5", "\xBD"};  // the last two: the UTF-8 bytes of
                                                                         // 好 split in two

bool matches(const std::vector<std::string>& stops, std::vector<int64_t> ids) {
  return StopStringCriteria(stops, decoder(kPieces)).match(ids).has_value();
}

TEST(StopStrings, MatchWhenTheStringReachesIntoTheNewestToken) {
  // Transformers' own examples (StopStringCriteria docstring).
  EXPECT_TRUE(matches({"stop"}, {0, 1}));     // st|op
  EXPECT_TRUE(matches({"stop"}, {10}));       // stop
  EXPECT_TRUE(matches({"stop"}, {0, 2}));     // st|opera
  EXPECT_TRUE(matches({"stop"}, {3, 4}));     // sto|pper
  EXPECT_TRUE(matches({"stop"}, {5, 6}));     // las|topper
  EXPECT_TRUE(matches({"stop"}, {7, 8, 9}));  // s|to|pped
  EXPECT_FALSE(matches({"stop"}, {10, 11}));  // stop|at: the string ended before the newest token
  EXPECT_FALSE(matches({"stop"}, {0, 1, 11}));
  EXPECT_FALSE(matches({"stop"}, {0, 2, 12}));
  EXPECT_FALSE(matches({"stop"}, {0}));
  EXPECT_TRUE(matches({"xyz", "top"}, {12, 8, 4}));  // to|pper, second string
  EXPECT_TRUE(matches({" stop"}, {13, 14, 0, 1}));   // a| |st|op
  EXPECT_FALSE(matches({" stop"}, {0, 1}));
}

TEST(StopStrings, MatchACharacterSplitAcrossTokens) {
  EXPECT_FALSE(matches({"好"}, {13, 15}));  // only the first two bytes so far
  EXPECT_TRUE(matches({"好"}, {13, 15, 16}));
  EXPECT_FALSE(matches({"好"}, {13, 15, 16, 13}));
}

TEST(StopStrings, RejectEmptyStringsAndAMissingDecoder) {
  EXPECT_THROW(StopStringCriteria({""}, decoder(kPieces)), Error);
  EXPECT_THROW(StopStringCriteria({}, decoder(kPieces)), Error);
  EXPECT_THROW(StopStringCriteria({"a"}, nullptr), Error);
}

TEST(StoppingCriteria, MaxLengthThenStopStringsThenEos) {
  GenerationConfig c =
      GenerationConfig::from_json(json::parse(R"({"eos_token_id": [11, 12], "stop_strings": "stop"})"));
  const StoppingCriteria s(c, 5, decoder(kPieces));
  EXPECT_EQ(s.check(std::vector<int64_t>{13, 13}), StopReason::none);
  EXPECT_EQ(s.check(std::vector<int64_t>{13, 12}), StopReason::eos);
  EXPECT_EQ(s.check(std::vector<int64_t>{13, 11}), StopReason::eos);
  EXPECT_EQ(s.check(std::vector<int64_t>{13, 0, 1}), StopReason::stop_string);
  EXPECT_EQ(s.check(std::vector<int64_t>{13, 13, 13, 13, 12}), StopReason::max_length);
  EXPECT_THROW(StoppingCriteria(c, 5), Error);  // stop strings need a decoder

  c.max_time = 0.0;
  const StoppingCriteria timed(c, 5, decoder(kPieces));
  EXPECT_EQ(timed.check(std::vector<int64_t>{13}), StopReason::max_time);
}

// Transformers' StopStringCriteria over a small byte-level vocabulary and over the real Qwen3 tokenizer's
// tokens.
TEST(StopStringsVsTransformers, RecordedSequences) {
  const auto refs = testing::load_refs("generation_refs.json");
  if (!refs)
    GTEST_SKIP() << "tests/generate/generation_refs.json not made yet (make_generation_refs.py, torch)";
  for (const char* section : {"stop_strings", "stop_strings_qwen3"}) {
    const json::Value* data = refs->find(section);
    if (data == nullptr) continue;  // the Qwen3 section needs the tokenizer when the references are made
    const testing::FakeByteDecoder decode = testing::decoder_from_hex(data->at("token_bytes"));
    for (const json::Value& c : data->at("cases").as_array()) {
      std::vector<std::string> stops;
      for (const json::Value& s : c.at("stop_strings").as_array()) stops.push_back(s.as_string());
      const StopStringCriteria criteria(stops, decode);
      const std::vector<int64_t> ids = testing::ids_of(c.at("input_ids"));
      for (size_t t = 1; t <= ids.size(); ++t) {
        EXPECT_EQ(criteria.match(std::span(ids).first(t)).has_value(), c.at("matches")[t - 1].as_bool())
            << section << " " << json::dump(c.at("stop_strings")) << " " << json::dump(c.at("input_ids"))
            << " at " << t;
      }
    }
  }
}

}  // namespace
}  // namespace tfm

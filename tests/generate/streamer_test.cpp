#include "tfm/generate/streamer.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace tfm {
namespace {

// 7 and 8 are the two halves of 好 (E5 A5 | BD).
const testing::FakeByteDecoder kDecode{{{0, "Hello"},
                                        {1, " world"},
                                        {2, ","},
                                        {3, " how"},
                                        {4, "\n"},
                                        {5, "\xE4\xBD\xA0"},  // 你
                                        {6, "\xE5\xA5\xBD"},  // 好
                                        {7, "\xE5\xA5"},
                                        {8, "\xBD"},
                                        {9, " are"}}};

struct Recorder {
  std::vector<std::string> pieces;
  std::vector<bool> ends;
  TextStreamer::OnText callback() {
    return [this](std::string_view text, bool end) {
      pieces.emplace_back(text);
      ends.push_back(end);
    };
  }
};

void put(TextStreamer& s, std::vector<int64_t> ids) {
  s.put(ids);
}

TEST(TextStreamer, FlushesOnNewlineCjkAndSpacesAndHoldsBackIncompleteCharacters) {
  Recorder r;
  TextStreamer s(kDecode, r.callback(), /*skip_prompt=*/true);
  put(s, {0, 3});  // the prompt: skipped
  put(s, {0});     // "Hello": the word may continue
  put(s, {1});     // "Hello world": up to the last space
  put(s, {2});     // "Hello world,"
  put(s, {4});     // a newline flushes everything and empties the cache
  put(s, {5});     // 你: CJK goes out at once
  put(s, {7});     // 你 + half of 好 (U+FFFD): held back
  put(s, {8});     // 你好
  s.end();
  EXPECT_EQ(r.pieces,
            (std::vector<std::string>{"", "Hello ", "", "world,\n", "\xE4\xBD\xA0", "", "\xE5\xA5\xBD", ""}));
  EXPECT_EQ(r.ends, (std::vector<bool>{false, false, false, false, false, false, false, true}));
}

TEST(TextStreamer, PutsThePromptUnlessSkippedAndEndFlushesTheRest) {
  Recorder r;
  TextStreamer s(kDecode, r.callback());
  put(s, {0, 1});  // prompt "Hello world"
  put(s, {9});     // " are"
  s.end();
  EXPECT_EQ(r.pieces, (std::vector<std::string>{"Hello ", "world ", "are"}));
  EXPECT_EQ(r.ends.back(), true);

  // After end() the next put() is a prompt again.
  Recorder q;
  TextStreamer t(kDecode, q.callback(), /*skip_prompt=*/true);
  put(t, {0});
  put(t, {1, 4});
  t.end();
  put(t, {3, 4});  // prompt of a second generation: skipped
  put(t, {9, 4});
  t.end();
  EXPECT_EQ(q.pieces, (std::vector<std::string>{" world\n", "", " are\n", ""}));
}

TEST(TextStreamer, AnInvalidByteFollowedByASpaceIsPrintedAsTransformersDoes) {
  Recorder r;
  TextStreamer s(kDecode, r.callback());
  put(s, {7});
  put(s, {9});
  s.end();
  EXPECT_EQ(r.pieces, (std::vector<std::string>{"", "\xEF\xBF\xBD ", "are"}));
}

TEST(TextStreamer, PiecesAddUpToTheDecodedText) {
  Recorder r;
  TextStreamer s(kDecode, r.callback(), /*skip_prompt=*/true);
  const std::vector<int64_t> generated = {0, 1, 2, 3, 9, 5, 7, 8, 4, 0, 9, 6, 1};
  put(s, {3});
  for (int64_t id : generated) put(s, {id});
  s.end();
  std::string joined;
  for (const std::string& p : r.pieces) joined += p;
  EXPECT_EQ(joined, kDecode(generated));
}

// Transformers' TextStreamer over a fake byte-level vocabulary and over the real Qwen3 tokenizer's tokens.
TEST(TextStreamerVsTransformers, RecordedStreams) {
  const auto refs = testing::load_refs("config_streamer_refs.json");
  ASSERT_TRUE(refs) << "tests/generate/config_streamer_refs.json is missing";
  for (const char* section : {"streamer", "streamer_qwen3"}) {
    const json::Value* data = refs->find(section);
    if (data == nullptr) continue;  // the Qwen3 section needs the tokenizer when the references are made
    const testing::FakeByteDecoder decode = testing::decoder_from_hex(data->at("token_bytes"));
    for (const json::Value& c : data->at("cases").as_array()) {
      SCOPED_TRACE(std::string(section) + " " + json::dump(c.at("puts")));
      Recorder r;
      TextStreamer s(decode, r.callback(), c.at("skip_prompt").as_bool());
      for (const json::Value& p : c.at("puts").as_array()) {
        if (p.is_string()) {
          s.end();
        } else {
          s.put(testing::ids_of(p));
        }
      }
      s.end();
      std::vector<std::string> pieces;
      std::vector<bool> ends;
      for (const json::Value& p : c.at("pieces").as_array()) {
        pieces.push_back(p[0].as_string());
        ends.push_back(p[1].as_bool());
      }
      EXPECT_EQ(r.pieces, pieces);
      EXPECT_EQ(r.ends, ends);
    }
  }
}

}  // namespace
}  // namespace tfm

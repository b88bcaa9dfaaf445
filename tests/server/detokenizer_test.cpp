// Streaming text out of tokens: settled text goes out at once, an incomplete character and a possible start
// of a stop string wait, and the pieces joined are the text of the whole generation up to its stop string.
#include "tfm/server/detokenizer.h"

#include <gtest/gtest.h>

#include <map>

namespace tfm::server {
namespace {

// Tokens are byte strings; decoding joins them, shows a trailing incomplete UTF-8 character as U+FFFD (as the
// tokenizers library does) and, like a SentencePiece decoder, drops the text's leading space.
const std::map<int64_t, std::string> kVocab = {
    {1, "Hel"},  {2, "lo"},      {3, " world"}, {4, "\xC3"},    {5, "\xA9"}, {6, "EN"}, {7, "Dxyz"},
    {8, "ough"}, {9, "xxENDyy"}, {10, "E"},     {11, " Hello"}, {12, "abc"}, {13, ""},
};

std::string decode(const std::vector<int64_t>& ids) {
  std::string text;
  for (int64_t id : ids) text += kVocab.at(id);
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0)
    text.replace(text.size() - 1, 1, "\xEF\xBF\xBD");
  if (text.starts_with(" ")) text.erase(0, 1);
  return text;
}

std::vector<std::string> stream(const std::vector<int64_t>& ids, std::vector<std::string> stop = {},
                                bool* stopped = nullptr) {
  IncrementalDetokenizer d(decode, std::move(stop));
  std::vector<std::string> pieces;
  for (int64_t id : ids) pieces.push_back(d.add(std::vector<int64_t>{id}));
  pieces.push_back(d.finish());
  if (stopped) *stopped = d.stopped();
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(IncrementalDetokenizer, HandsOutEachTokensTextAtOnce) {
  EXPECT_EQ(stream({1, 2, 3}), (Pieces{"Hel", "lo", " world", ""}));
}

TEST(IncrementalDetokenizer, WaitsForTheRestOfACharacter) {
  EXPECT_EQ(stream({1, 4, 5, 2}), (Pieces{"Hel", "", "\xC3\xA9", "lo", ""}));
  // A generation that ends inside a character gives what the decoder gives.
  EXPECT_EQ(stream({1, 4}), (Pieces{"Hel", "", "\xEF\xBF\xBD"}));
}

TEST(IncrementalDetokenizer, KeepsTheContextOfTheFirstToken) {
  // decode([11, 3]) is "Hello world": the first token loses its space, the second keeps it.
  EXPECT_EQ(stream({11, 3}), (Pieces{"Hello", " world", ""}));
  EXPECT_EQ(stream({11, 13, 3}), (Pieces{"Hello", "", " world", ""}));
}

TEST(IncrementalDetokenizer, EndsTheTextBeforeAStopString) {
  bool stopped = false;
  EXPECT_EQ(stream({12, 6, 7, 1}, {"END"}, &stopped), (Pieces{"abc", "", "", "", ""}));
  EXPECT_TRUE(stopped);
  EXPECT_EQ(stream({9}, {"END"}, &stopped), (Pieces{"xx", ""}));
  EXPECT_TRUE(stopped);
}

TEST(IncrementalDetokenizer, HoldsBackWhatCouldStartAStopString) {
  bool stopped = true;
  EXPECT_EQ(stream({12, 6, 8}, {"END", "ENOUGH"}, &stopped), (Pieces{"abc", "", "ENough", ""}));
  EXPECT_FALSE(stopped);
  // At the end nothing is held back.
  EXPECT_EQ(stream({12, 10}, {"END"}), (Pieces{"abc", "", "E"}));
}

}  // namespace
}  // namespace tfm::server

// Server-sent events read back in pieces of any size give the events' data, whole and in order.
#include "tfm/server/event_stream_reader.h"

#include <gtest/gtest.h>

#include "tfm/core/error.h"

namespace tfm::server {
namespace {

using Events = std::vector<std::string>;

TEST(EventStreamReader, SplitsEventsWhereverThePiecesEnd) {
  const std::string stream = "data: {\"a\": 1}\n\n: a comment\n\ndata: {\"b\": 2}\n\ndata: [DONE]\n\n";
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    EventStreamReader reader;
    Events events;
    for (size_t at = 0; at < stream.size(); at += piece) {
      for (std::string& e : reader.add(std::string_view(stream).substr(at, piece)))
        events.push_back(std::move(e));
    }
    EXPECT_EQ(events, (Events{"{\"a\": 1}", "{\"b\": 2}", "[DONE]"})) << "pieces of " << piece;
  }
}

// The format as WHATWG's HTML standard specifies it: any line ending, a data line's one optional space, data
// lines joined, other fields and comments skipped, events without data dropped.
TEST(EventStreamReader, ReadsTheFormatAsSpecified) {
  const std::string stream =
      "event: message\r\nid: 7\r\ndata: {\"a\": 1}\r\n\r\n"  // CRLF, fields before the data
      "data:two\rdata: lines\r\r"                                // CR, no space after the colon
      ": comment\nretry: 10\n\n"                                  // no data: no event
      "data\ndata:  kept\n\n"                                     // a field without a colon; a second space stays
      "data: [DONE]\n\n";
  const Events want = {"{\"a\": 1}", "two\nlines", "\n kept", "[DONE]"};
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    EventStreamReader reader;
    Events events;
    for (size_t at = 0; at < stream.size(); at += piece) {
      for (std::string& e : reader.add(std::string_view(stream).substr(at, piece))) events.push_back(std::move(e));
    }
    EXPECT_EQ(events, want) << "pieces of " << piece;
  }
}

TEST(EventStreamReader, ALineThatNeverEndsIsAnError) {
  EventStreamReader reader;
  const std::string megabyte(size_t{1} << 20, 'x');
  EXPECT_EQ(reader.add("data: "), Events{});
  for (size_t i = 0; i + 1 < EventStreamReader::kMaxLineBytes >> 20; ++i) EXPECT_EQ(reader.add(megabyte), Events{});
  EXPECT_THROW(reader.add(megabyte), Error);
}

TEST(EventStreamReader, HoldsAnIncompleteEvent) {
  EventStreamReader reader;
  EXPECT_EQ(reader.add("data: {\"a\""), Events{});
  EXPECT_EQ(reader.add(": 1}\n"), Events{});
  EXPECT_EQ(reader.add("\n"), Events{"{\"a\": 1}"});
}

}  // namespace
}  // namespace tfm::server

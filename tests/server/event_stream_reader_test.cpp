// Server-sent events read back in pieces of any size give the events' data, whole and in order.
#include "tfm/server/event_stream_reader.h"

#include <gtest/gtest.h>

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

TEST(EventStreamReader, HoldsAnIncompleteEvent) {
  EventStreamReader reader;
  EXPECT_EQ(reader.add("data: {\"a\""), Events{});
  EXPECT_EQ(reader.add(": 1}\n"), Events{});
  EXPECT_EQ(reader.add("\n"), Events{"{\"a\": 1}"});
}

}  // namespace
}  // namespace tfm::server

// A server-sent event stream as `tfm bench serve` reads another server's answer, arriving in pieces: the
// first byte says how many of the next bytes are piece sizes (each byte b a piece of b + 1 bytes, used in
// turn, over and over), the rest is the stream. Wherever the pieces end, the reader must give the events it
// gives for the stream read at once.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/server/event_stream_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece_count = std::min<size_t>(data[0], size - 1);
  const uint8_t* pieces = data + 1;
  const std::string_view stream(reinterpret_cast<const char*>(pieces + piece_count), size - 1 - piece_count);

  tfm::server::EventStreamReader whole;
  const std::vector<std::string> expected = whole.add(stream);

  tfm::server::EventStreamReader split;
  std::vector<std::string> events;
  for (size_t at = 0, i = 0; at < stream.size(); ++i) {
    const size_t piece = piece_count ? pieces[i % piece_count] + size_t{1} : stream.size();
    for (std::string& event : split.add(stream.substr(at, piece))) events.push_back(std::move(event));
    at += piece;
  }
  if (events != expected) std::abort();
  return 0;
}

// The client's side of server-sent events (the WHATWG event stream format): a stream read in pieces of any
// size, split into its events' data. Used by `tfm bench serve` and the server's tests.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::server {

class EventStreamReader {
 public:
  // Adds the bytes received; returns the data of each event they complete ("[DONE]" as it is), in order.
  // Lines end with LF, CRLF or CR. An event's "data" lines are joined with LF; its other fields (event, id,
  // retry) and comments (":" lines) are skipped; an event without data gives nothing. A line longer than
  // kMaxLineBytes is an error (a stream that never ends its line would take all memory).
  std::vector<std::string> add(std::string_view bytes);

  static constexpr size_t kMaxLineBytes = size_t{16} << 20;

 private:
  void end_line(std::vector<std::string>& events);

  std::string line_;        // the line being received
  std::string data_;        // the event's data lines so far, each followed by LF
  bool after_cr_ = false;   // the last line ended with CR: an LF that comes next ends nothing
};

}  // namespace tfm::server

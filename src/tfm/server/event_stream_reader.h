// The client's side of server-sent events: a stream read in pieces of any size, split into its events' data.
// Used by `tfm bench serve` and the server's tests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tfm::server {

class EventStreamReader {
 public:
  // Adds the bytes received; returns the data of each event they complete ("[DONE]" as it is), in order.
  // Lines other than "data: ..." (comments, event names) are skipped.
  std::vector<std::string> add(std::string_view bytes);

 private:
  std::string pending_;  // the start of an event not complete yet
};

}  // namespace tfm::server

#include "tfm/server/event_stream_reader.h"

namespace tfm::server {

std::vector<std::string> EventStreamReader::add(std::string_view bytes) {
  pending_.append(bytes);
  std::vector<std::string> events;
  size_t start = 0;
  for (size_t end; (end = pending_.find("\n\n", start)) != std::string::npos; start = end + 2) {
    const std::string_view event = std::string_view(pending_).substr(start, end - start);
    constexpr std::string_view kData = "data: ";
    if (event.starts_with(kData)) events.emplace_back(event.substr(kData.size()));
  }
  pending_.erase(0, start);
  return events;
}

}  // namespace tfm::server

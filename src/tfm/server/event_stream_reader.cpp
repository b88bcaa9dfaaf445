#include "tfm/server/event_stream_reader.h"

#include "tfm/core/error.h"

namespace tfm::server {

std::vector<std::string> EventStreamReader::add(std::string_view bytes) {
  std::vector<std::string> events;
  size_t i = 0;
  while (i < bytes.size()) {
    if (after_cr_) {
      after_cr_ = false;
      if (bytes[i] == '\n') {
        ++i;
        continue;
      }
    }
    const size_t end = bytes.find_first_of("\r\n", i);
    const std::string_view part = bytes.substr(i, end == std::string_view::npos ? bytes.size() - i : end - i);
    check(line_.size() + part.size() <= kMaxLineBytes, "event stream: a line longer than ", kMaxLineBytes,
          " bytes");
    line_.append(part);
    if (end == std::string_view::npos) break;
    end_line(events);
    after_cr_ = bytes[end] == '\r';
    i = end + 1;
  }
  return events;
}

void EventStreamReader::end_line(std::vector<std::string>& events) {
  const std::string_view line = line_;
  if (line.empty()) {  // the event ends
    if (!data_.empty()) {
      data_.pop_back();
      events.push_back(std::move(data_));
      data_.clear();
    }
  } else if (line.front() != ':') {
    const size_t colon = line.find(':');
    std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    if (value.starts_with(' ')) value.remove_prefix(1);
    if (line.substr(0, colon) == "data") {
      check(data_.size() + value.size() < kMaxLineBytes, "event stream: an event's data longer than ",
            kMaxLineBytes, " bytes");
      data_.append(value);
      data_.push_back('\n');
    }
  }
  line_.clear();
}

}  // namespace tfm::server

// Shared by the test programs: what tfm logs while a LogCapture lives, kept instead of printed.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tfm/core/logging.h"

namespace tfm::test_support {

class LogCapture {
 public:
  explicit LogCapture(logging::Level verbosity = logging::Level::debug) : verbosity_(logging::verbosity()) {
    logging::set_verbosity(verbosity);
    previous_ = logging::set_handler(
        [this](logging::Level level, const std::string& message) { messages_.emplace_back(level, message); });
  }
  ~LogCapture() {
    logging::set_handler(std::move(previous_));
    logging::set_verbosity(verbosity_);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The messages logged at `level`, in order.
  std::vector<std::string> at(logging::Level level) const {
    std::vector<std::string> out;
    for (const auto& [l, message] : messages_) {
      if (l == level) out.push_back(message);
    }
    return out;
  }

 private:
  logging::Level verbosity_;
  logging::Handler previous_;
  std::vector<std::pair<logging::Level, std::string>> messages_;
};

}  // namespace tfm::test_support

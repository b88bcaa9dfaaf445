// The one error type of tfm. Every failure a user can cause (a bad file, a bad argument, a missing device)
// is thrown as tfm::Error with a message that names what was wrong and where.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tfm {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Builds a message from any streamable parts: throw_error("tensor ", name, " has shape ", n).
template <typename... Parts>
[[noreturn]] void throw_error(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  throw Error(out.str());
}

// For conditions that user input can cause; internal invariants use assert.
template <typename... Parts>
void check(bool condition, Parts&&... parts) {
  if (!condition) throw_error(std::forward<Parts>(parts)...);
}

}  // namespace tfm

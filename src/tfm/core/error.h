// The one error type of tfm. Every failure a user can cause (a bad file, a bad argument, a missing device)
// is thrown as tfm::Error with a message that names what was wrong and where.
#pragma once

#include <cstdint>
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

// a * b of sizes that files and users give: a product past int64 is a tfm::Error naming `what`, where it
// would otherwise wrap around into a small or negative size.
template <typename What>
int64_t checked_mul(int64_t a, int64_t b, const What& what) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product))
    throw_error(what, " (", a, " * ", b, ") does not fit in 64 bits");
  return product;
}

}  // namespace tfm

// Shared by the test programs: the message of the tfm::Error a call throws.
#pragma once

#include <functional>
#include <string>

#include "tfm/core/error.h"

namespace tfm::test_support {

// The message of the tfm::Error that f throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace tfm::test_support

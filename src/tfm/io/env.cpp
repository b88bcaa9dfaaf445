#include "tfm/io/env.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

namespace tfm::io {

bool env_is_true(const char* name) {
  const char* raw = std::getenv(name);
  std::string value = raw ? raw : "";
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return value == "1" || value == "ON" || value == "YES" || value == "TRUE";
}

}  // namespace tfm::io

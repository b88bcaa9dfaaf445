// Where the tokenizer tests find their references: beside the tests.
#pragma once

#include <string>

#include "tfm/io/json.h"

namespace tfm::tokenizer::testing {

inline std::string tests_dir() {
  return TFM_SOURCE_DIR "/tests/tokenizer";
}
inline json::Value reference(const std::string& name) {
  return json::parse_file(tests_dir() + "/references/" + name + ".json");
}

inline std::vector<int64_t> ids_of(const json::Value& list) {
  std::vector<int64_t> out;
  for (const json::Value& v : list.as_array()) out.push_back(v.as_int());
  return out;
}

}  // namespace tfm::tokenizer::testing

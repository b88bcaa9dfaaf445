// Shared by the test programs: the demo model of models/demo and the text Transformers generates with it.
#pragma once

#include <string>

#include "tfm/io/json.h"

namespace tfm::test_support {

inline const std::string kDemoModel = std::string(TFM_SOURCE_DIR) + "/models/demo";

// Transformers' greedy text for "The old man said" from the demo model: in float32 as recorded when it was
// trained, and in bfloat16 (its config's dtype, what dtype="auto" runs) on the CPU, recorded by
// tests/fixtures/make_dtype_references.py.
inline std::string demo_reference_text(const std::string& dtype) {
  const bool f32 = dtype == "float32";
  const json::Value reference =
      json::parse_file(kDemoModel + (f32 ? "/reference.json" : "/reference_bfloat16.json"));
  const json::Value& records = f32 ? reference.at("references") : reference.at("references").at("cpu");
  for (const auto& r : records.as_array()) {
    if (r.at("prompt").as_string() == "The old man said") return r.at("text").as_string();
  }
  return "";
}

}  // namespace tfm::test_support

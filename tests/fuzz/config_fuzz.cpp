// config.json as ModelConfig reads it: any text gives a config or a tfm::Error.
#include <cstdint>
#include <string_view>

#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tfm::ModelConfig::from_json(
        tfm::json::parse(std::string_view(reinterpret_cast<const char*>(data), size)));
  } catch (const tfm::Error&) {
  }
  return 0;
}

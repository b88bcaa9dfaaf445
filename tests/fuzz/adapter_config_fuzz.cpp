// A LoRA adapter's adapter_config.json as tfm loads it (adapters come from anyone on the Hub): any text gives
// a config or a tfm::Error, and a config read, written out as save_adapter writes it, reads back without one.
#include <cstdint>
#include <string_view>

#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/model/lora_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tfm::LoraConfig config;
  try {
    config = tfm::LoraConfig::from_json(
        tfm::json::parse(std::string_view(reinterpret_cast<const char*>(data), size)));
  } catch (const tfm::Error&) {
    return 0;
  }
  tfm::LoraConfig::from_json(tfm::json::parse(tfm::json::dump(config.to_json())));
  return 0;
}

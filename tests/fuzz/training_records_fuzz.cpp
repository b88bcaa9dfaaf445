// A training file (JSON Lines of "text" or "messages" records) as tfm train reads it: any bytes give records
// or a tfm::Error.
#include <cstdint>
#include <string_view>

#include "tfm/core/error.h"
#include "tfm/train/training_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tfm::parse_training_records(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.jsonl");
  } catch (const tfm::Error&) {
  }
  return 0;
}

// A `tfm train --config` file as TrainingArguments reads it: any text gives arguments or a tfm::Error.
#include <cstdint>
#include <string_view>

#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/train/training_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tfm::TrainingArguments::from_json(
        tfm::json::parse(std::string_view(reinterpret_cast<const char*>(data), size)));
  } catch (const tfm::Error&) {
  }
  return 0;
}

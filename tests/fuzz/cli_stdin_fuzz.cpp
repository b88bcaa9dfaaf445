// What tfm tokenize, detokenize and chat-template accept on standard input: any text gives a request or a
// tfm::Error.
#include <cstdint>
#include <string_view>

#include "stdin_requests.h"
#include "tfm/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    tfm::cli::parse_texts_request(text);
  } catch (const tfm::Error&) {
  }
  try {
    tfm::cli::parse_id_lists_request(text);
  } catch (const tfm::Error&) {
  }
  try {
    tfm::cli::parse_chat_template_request(text);
  } catch (const tfm::Error&) {
  }
  return 0;
}

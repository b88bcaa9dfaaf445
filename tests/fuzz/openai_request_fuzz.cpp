// An HTTP request body as tfm serve reads it: the first byte picks the endpoint (even: /v1/chat/completions,
// odd: /v1/completions), the rest is the body. Any bytes give a request or an ApiError; any other exception
// escapes, for the client would get a 500 where it should be told what it got wrong.
#include <cstdint>
#include <string_view>

#include "tfm/server/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto endpoint =
      data[0] % 2 == 0 ? tfm::server::Endpoint::chat_completions : tfm::server::Endpoint::completions;
  try {
    tfm::server::parse_completion_request(
        endpoint, std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  } catch (const tfm::server::ApiError&) {
  }
  return 0;
}

// Request bodies read field by field: whatever number a client sends, a value out of range is an ApiError 400
// naming the field and quoting the value.
#include "tfm/server/openai_request.h"

#include <gtest/gtest.h>

#include <string>

namespace tfm::server {
namespace {

// The message of the ApiError 400 on `param` that the completions body gives.
std::string rejection(const std::string& body, const std::string& param) {
  try {
    parse_completion_request(Endpoint::completions, body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, param);
    return e.what();
  }
  return "(no error)";
}

TEST(OpenAIRequest, QuotesANumberOutOfRangeWhateverItsSize) {
  EXPECT_EQ(rejection(R"({"prompt": "x", "temperature": 3})", "temperature"),
            "Invalid 'temperature': expected a value <= 2, but got 3 instead.");
  EXPECT_EQ(rejection(R"({"prompt": "x", "temperature": 2.5})", "temperature"),
            "Invalid 'temperature': expected a value <= 2, but got 2.5 instead.");
  // Past int64_t, where a whole double no longer converts to an integer.
  EXPECT_EQ(rejection(R"({"prompt": "x", "temperature": 1e300})", "temperature"),
            "Invalid 'temperature': expected a value <= 2, but got 1e+300 instead.");
  EXPECT_EQ(rejection(R"({"prompt": "x", "presence_penalty": -1e19})", "presence_penalty"),
            "Invalid 'presence_penalty': expected a value >= -2, but got -1e+19 instead.");
}

// A member given twice counts once, with its last value, as Python's json.loads reads the body.
TEST(OpenAIRequest, AMemberGivenTwiceTakesItsLastValue) {
  const CompletionRequest r = parse_completion_request(
      Endpoint::completions, R"({"prompt": "x", "max_tokens": 3, "stream": true, "max_tokens": 5, "stream": false})");
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(rejection(R"({"prompt": "x", "n": 2, "n": 0})", "n"),
            "Invalid 'n': expected a value >= 1, but got 0 instead.");
}

}  // namespace
}  // namespace tfm::server

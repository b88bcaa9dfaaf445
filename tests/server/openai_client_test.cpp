// The official `openai` Python client (installed by scripts/setup) against the server started here: see
// openai_client_check.py. Skipped when python3 or the package is missing; the C++ tests beside it cover the
// same ground over raw HTTP.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "live_server.h"

namespace tfm::server::test {
namespace {

struct ShellRun {
  int status = -1;
  std::string output;  // stdout and stderr together
};

ShellRun shell(const std::string& command) {
  ShellRun r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.output.append(buffer, n);
  r.status = pclose(pipe);
  return r;
}

TEST(OpenAiClient, ChatCompletionsErrorsAndAClosedStream) {
  if (shell("python3 -c 'import openai'").status != 0)
    GTEST_SKIP() << "python3 with the openai package is missing";
  ServerConfig config;
  config.api_key = "sk-client-test";
  LiveServer server(config);
  const ShellRun r =
      shell("python3 " + std::string(TFM_SOURCE_DIR) +
            "/tests/server/openai_client_check.py http://127.0.0.1:" + std::to_string(server.port()) +
            "/v1 sk-client-test");
  EXPECT_EQ(r.status, 0) << r.output;
}

}  // namespace
}  // namespace tfm::server::test

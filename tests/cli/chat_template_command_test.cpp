// `tfm chat-template`: the exact form outside checks use, against Transformers' renderings of Qwen3.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "support/test_assets.h"
#include "tfm/io/json.h"

namespace {

const std::string kQwen3 = tfm::test_support::shipped_tokenizer("qwen3");

struct Result {
  int exit_code;
  std::string out;
};

Result run_chat_template(const std::string& model, const std::string& request) {
  const std::string input = ::testing::TempDir() + "chat_request_" + std::to_string(::getpid()) + ".json";
  std::ofstream(input, std::ios::binary) << request;
  const std::string command =
      std::string(TFM_BINARY) + " chat-template --model '" + model + "' < '" + input + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  std::remove(input.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(ChatTemplateCommand, PrintsExactlyWhatTransformersRenders) {
  const tfm::json::Value cases = tfm::json::parse_file(TFM_SOURCE_DIR "/tests/jinja/goldens/qwen3.json");
  for (const auto& c : cases.as_array()) {
    SCOPED_TRACE(c.at("name").as_string());
    const Result r = run_chat_template(kQwen3, tfm::json::dump(c.at("inputs")));
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out, c.at("output").as_string());
  }
}

TEST(ChatTemplateCommand, TemplateErrorsExitNonZero) {
  const Result missing = run_chat_template(kQwen3, R"({"add_generation_prompt": true})");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_EQ(missing.out.rfind("error: ", 0), 0u) << missing.out;
  const Result raised = run_chat_template(
      kQwen3,
      R"({"messages": [{"role": "user", "content": "x"}], "chat_template": "{{ raise_exception('no way') }}"})");
  EXPECT_NE(raised.exit_code, 0);
  EXPECT_NE(raised.out.find("no way"), std::string::npos) << raised.out;
  EXPECT_EQ(raised.out.rfind("error: ", 0), 0u) << raised.out;
}

}  // namespace

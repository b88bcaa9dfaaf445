// `tfm tokenize` and `tfm detokenize` against the Transformers references of the tokenizer tests.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <unistd.h>
#include <cstdio>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/test_assets.h"
#include "tfm/io/json.h"

namespace tfm {
namespace {

// Runs `tfm <args>` with stdin_text on standard input; returns standard output and sets the exit code.
std::string run_tfm(const std::string& args, const std::string& stdin_text, int& exit_code) {
  // ctest runs test cases as parallel processes: each needs a file of its own.
  const auto input = std::filesystem::temp_directory_path() /
                     ("tfm_tokenize_command_test_" + std::to_string(getpid()) + ".json");
  std::ofstream(input, std::ios::binary) << stdin_text;
  const std::string command = std::string(TFM_BINARY) + " " + args + " < " + input.string() + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  exit_code = WEXITSTATUS(pclose(pipe));
  std::filesystem::remove(input);
  return out;
}

class TokenizeCommand : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizeCommand, MatchesTransformers) {
  const std::string dir = test_support::shipped_tokenizer(GetParam());
  const json::Value rec =
      json::parse_file(TFM_SOURCE_DIR "/tests/tokenizer/references/" + GetParam() + ".json")
          .at("transformers");
  int code = 0;
  const std::string texts = json::dump(rec.at("texts"));
  EXPECT_EQ(json::parse(run_tfm("tokenize --model " + dir, texts, code)), rec.at("with_special"));
  EXPECT_EQ(code, 0);
  EXPECT_EQ(json::parse(run_tfm("tokenize --model " + dir + " --no-special-tokens", texts, code)),
            rec.at("without_special"));
  const std::string ids = json::dump(rec.at("with_special"));
  EXPECT_EQ(json::parse(run_tfm("detokenize --model " + dir, ids, code)), rec.at("decoded"));
  EXPECT_EQ(json::parse(run_tfm("detokenize --model " + dir + " --skip-special-tokens", ids, code)),
            rec.at("decoded_skip"));
}

TEST_P(TokenizeCommand, BadInputFails) {
  const std::string dir = test_support::shipped_tokenizer(GetParam());
  int code = 0;
  run_tfm("tokenize --model " + dir, "[1, 2]", code);
  EXPECT_EQ(code, 1);
  run_tfm("detokenize --model " + dir, "[[\"a\"]]", code);
  EXPECT_EQ(code, 1);
  run_tfm("tokenize --model /nonexistent", "[\"a\"]", code);
  EXPECT_EQ(code, 1);
}

// A tokenizer.json whose Split pattern backtracks without bound: the failure on a worker thread of the batch
// is an error message and exit code 1, not an abort.
TEST(TokenizeCommandErrors, ARunawayRegexFailsCleanly) {
  const auto dir = std::filesystem::temp_directory_path() / ("tfm_runaway_regex_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json")
      << R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a+)+$"},
      "behavior": "Isolated", "invert": false},
      "model": {"type": "WordLevel", "unk_token": "a", "vocab": {"a": 0, "b": 1}}})";
  const std::string text = "\"" + std::string(40, 'a') + "b\"";
  int code = 0;
  const std::string out = run_tfm("tokenize --model " + dir.string(), "[" + text + ", " + text + "]", code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(out, "");
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Shipped, TokenizeCommand, ::testing::Values("qwen3", "llama2"));

}  // namespace
}  // namespace tfm

// The `tfm` program as outside checks use it: exact command forms, JSON output, errors and exit codes.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "../xpu/test_platform.h"
#include "support/demo_model.h"
#include "support/shell.h"
#include "tfm/io/json.h"

namespace {

using Result = tfm::test_support::ShellResult;
using tfm::test_support::demo_reference_text;
using tfm::test_support::shell;

// Runs tfm; stderr joins stdout unless `keep_stderr` is false (then it is dropped). The redirection comes
// before `args`, which may end in a here-document.
Result tfm_run(const std::string& args, bool keep_stderr = true) {
  return shell(std::string(TFM_BINARY) + (keep_stderr ? " 2>&1 " : " 2>/dev/null ") + args);
}

const std::string kModel = std::string(TFM_SOURCE_DIR) + "/tests/fixtures/models/llama_gqa";

std::vector<int64_t> ints(const tfm::json::Value& v) {
  std::vector<int64_t> out;
  for (const auto& x : v.as_array()) out.push_back(x.as_int());
  return out;
}

// cuBLAS is opened by the first CUDA matmul, not linked: `tfm --help` and CPU runs do not map its ~150 MB.
TEST(Cli, LinksNoCuBlas) {
  const Result r = shell("ldd " + std::string(TFM_BINARY) + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("cublas"), std::string::npos) << r.out;
}

TEST(Cli, ForwardJsonMatchesTransformers) {
  const tfm::json::Value ref = tfm::json::parse_file(kModel + "/reference.json").at("prompts")[1];
  const Result r =
      tfm_run("forward --model " + kModel + " --ids 1,17,42,99,3,250,7 --device cpu --dtype float32 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const tfm::json::Value out = tfm::json::parse(r.out);
  EXPECT_EQ(ints(out.at("argmax")), ints(ref.at("argmax")));
  ASSERT_EQ(out.at("last_logits").size(), ref.at("last_logits").size());
  for (size_t i = 0; i < ref.at("last_logits").size(); ++i) {
    EXPECT_NEAR(out.at("last_logits")[i].as_double(), ref.at("last_logits")[i].as_double(), 1e-4);
  }
}

TEST(Cli, GenerateJsonHoldsOnlyTheGeneratedIds) {
  const tfm::json::Value ref = tfm::json::parse_file(kModel + "/reference.json").at("prompts")[1];
  const Result r =
      tfm_run("generate --model " + kModel +
                  " --ids 1,17,42,99,3,250,7 --max-new-tokens 24 --device cpu --dtype float32 --json",
              false);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(ints(tfm::json::parse(r.out).at("ids")), ints(ref.at("generated")));
}

// TFM_PROFILE_OPS=1 prints each op's time at exit (stderr), by op and tensors, and changes no result.
TEST(Cli, ProfileOpsReportsTheOpsARunUsed) {
  const std::string args = "generate --model " + kModel + " --ids 1,17,42 --max-new-tokens 3 --device cpu --dtype float32 --json";
  const Result plain = tfm_run(args, false);
  const Result profiled = shell("TFM_PROFILE_OPS=1 " + std::string(TFM_BINARY) + " " + args + " 2>&1 >/dev/null");
  const Result profiled_out = shell("TFM_PROFILE_OPS=1 " + std::string(TFM_BINARY) + " " + args + " 2>/dev/null");
  ASSERT_EQ(plain.status, 0) << plain.out;
  ASSERT_EQ(profiled.status, 0) << profiled.out;
  EXPECT_EQ(ints(tfm::json::parse(profiled_out.out).at("ids")), ints(tfm::json::parse(plain.out).at("ids")));
  EXPECT_NE(profiled.out.find("op profile (TFM_PROFILE_OPS)"), std::string::npos) << profiled.out;
  EXPECT_NE(profiled.out.find("linear float32[3, 64]"), std::string::npos) << profiled.out;  // the prompt's rows
  EXPECT_NE(profiled.out.find("paged_attention"), std::string::npos) << profiled.out;
  EXPECT_EQ(tfm_run(args, true).out.find("op profile"), std::string::npos);  // off unless asked
}

// Profiled ops wait for the device, which a device graph's capture cannot hold: steps run without graphs then
// (xpu records graphs on PoCL, as cuda captures them).
TEST(Cli, ProfileOpsRunsStepsWithoutDeviceGraphs) {
  const Result profiled = shell("TFM_PROFILE_OPS=1 TFM_XPU_PLATFORM=\"" + tfm::xpu::test_platform() + "\" " +
                                std::string(TFM_BINARY) + " generate --model " + kModel +
                                " --ids 1,17,42 --max-new-tokens 4 --device xpu --dtype float32 2>&1 >/dev/null");
  if (profiled.status != 0 && profiled.out.find("is not available") != std::string::npos) GTEST_SKIP() << profiled.out;
  ASSERT_EQ(profiled.status, 0) << profiled.out;
  EXPECT_NE(profiled.out.find("op profile (TFM_PROFILE_OPS)"), std::string::npos) << profiled.out;
  EXPECT_EQ(profiled.out.find("device graph"), std::string::npos) << profiled.out;
}

// TFM_XPU_TIMELINE=1 prints the xpu kernels' device time at exit, from the queue's own timestamps, and
// changes no result. Steps replayed from a graph run no timed launch; the prompt's forward pass always
// launches.
TEST(Cli, XpuTimelineReportsTheKernelsARunLaunched) {
  const std::string run = "TFM_XPU_PLATFORM=\"" + tfm::xpu::test_platform() + "\" " +
                          std::string(TFM_BINARY) + " generate --model " + kModel +
                          " --ids 1,17,42 --max-new-tokens 3 --device xpu --dtype float32 --json";
  const Result plain = shell(run + " 2>/dev/null");
  if (plain.status != 0 && plain.out.find("is not available") != std::string::npos) GTEST_SKIP() << plain.out;
  const Result timed = shell("TFM_XPU_TIMELINE=1 " + run + " 2>&1 >/dev/null");
  const Result timed_out = shell("TFM_XPU_TIMELINE=1 " + run + " 2>/dev/null");
  ASSERT_EQ(plain.status, 0) << plain.out;
  ASSERT_EQ(timed.status, 0) << timed.out;
  EXPECT_EQ(ints(tfm::json::parse(timed_out.out).at("ids")), ints(tfm::json::parse(plain.out).at("ids")));
  EXPECT_NE(timed.out.find("kernel timeline (TFM_XPU_TIMELINE)"), std::string::npos) << timed.out;
  EXPECT_NE(timed.out.find(" attention_"), std::string::npos) << timed.out;
  EXPECT_EQ(shell(run + " 2>&1 >/dev/null").out.find("kernel timeline"),
            std::string::npos);  // off unless asked
}

const std::string& kDemo = tfm::test_support::kDemoModel;

TEST(Cli, GenerateUsesTheDemoModelByDefaultAndStreamsTransformersText) {
  const Result r = tfm_run("generate --prompt \"The old man said\" --max-new-tokens 40 --device cpu", false);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, demo_reference_text("bfloat16") + "\n");
}

TEST(Cli, GenerateJsonWithAPromptHasIdsAndText) {
  const Result r = tfm_run("generate --model " + kDemo +
                               " --prompt \"The old man said\" --max-new-tokens 40 --dtype float32 --json",
                           false);
  ASSERT_EQ(r.status, 0) << r.out;
  const tfm::json::Value out = tfm::json::parse(r.out);
  EXPECT_EQ(out.at("ids").size(), 40u);
  EXPECT_EQ("The old man said" + out.at("text").as_string(), demo_reference_text("float32"));
}

TEST(Cli, ChatAnswersEachTurnAndResets) {
  // popen runs /bin/sh: the input comes through a here-document.
  const Result s =
      tfm_run("chat --max-new-tokens 8 --device cpu <<'EOF'\nHello\n/reset\nHi there\n/exit\nEOF");
  ASSERT_EQ(s.status, 0) << s.out;
  size_t prompts = 0;
  for (size_t at = s.out.find("> "); at != std::string::npos; at = s.out.find("> ", at + 2)) ++prompts;
  EXPECT_GE(prompts, 4u) << s.out;  // one prompt per line read, and the last one before /exit
}

TEST(Cli, QuickstartExampleMirrorsTheGuide) {
  const Result r = shell(std::string(TFM_QUICKSTART) + " " + kDemo + " 2>/dev/null");
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.out, demo_reference_text("bfloat16") + "\n");
}

TEST(Cli, AttentionImplementationsGiveTheSameTokens) {
  std::string first;
  for (const std::string attn : {"eager", "sdpa", "flash_attention_2", "paged|sdpa"}) {
    const Result r =
        tfm_run("generate --model " + kModel + " --ids 1,17,42 --max-new-tokens 12 --device cpu --json " +
                    "--attn-implementation '" + attn + "'",
                false);
    ASSERT_EQ(r.status, 0) << attn << r.out;
    const std::string ids = tfm::json::dump(tfm::json::parse(r.out).at("ids"));
    if (first.empty()) first = ids;
    EXPECT_EQ(ids, first) << attn;
  }
  const Result fa3 =
      tfm_run("generate --model " + kModel + " --ids 1 --device cpu --attn-implementation flash_attention_3");
  EXPECT_NE(fa3.status, 0);
  EXPECT_NE(fa3.out.find("Flash Attention 3 is not available on CPU"), std::string::npos) << fa3.out;
  const Result bogus =
      tfm_run("generate --model " + kModel + " --ids 1 --device cpu --attn-implementation flex");
  EXPECT_NE(bogus.status, 0);
  EXPECT_NE(bogus.out.find("is not supported"), std::string::npos) << bogus.out;
}

// The engine's asynchronous batching follows the device unless forced either way; forcing both is an error.
TEST(Cli, BenchThroughputForcesAsynchronousBatching) {
  const std::string bench = "bench throughput --model " + kModel +
                            " --device cpu --dtype float32 --num-prompts 3 --input-len 5 --output-len 4 --json";
  for (const auto& [flag, on] : std::vector<std::pair<std::string, bool>>{
           {"", false}, {" --async-batching", true}, {" --no-async-batching", false}}) {
    const Result r = tfm_run(bench + flag, false);
    ASSERT_EQ(r.status, 0) << flag << ": " << r.out;
    const tfm::json::Value out = tfm::json::parse(r.out);
    EXPECT_EQ(out.at("async_batching").as_bool(), on) << flag;
    EXPECT_NEAR(out.at("output_tokens_per_s").as_double() * out.at("seconds").as_double(), 12.0, 1e-6) << flag;
  }
  const Result both = tfm_run(bench + " --async-batching --no-async-batching");
  EXPECT_NE(both.status, 0);
  EXPECT_NE(both.out.find("--async-batching and --no-async-batching contradict each other"), std::string::npos)
      << both.out;
}

// bench latency times greedy decode, or with --do-sample decode sampled on the device; its figures add up.
TEST(Cli, BenchLatencyTimesGreedyOrSampledDecode) {
  const std::string bench =
      "bench latency --model " + kModel +
      " --device cpu --dtype float32 --batch-size 2 --input-len 5 --output-len 3 --repeat 1 --json";
  for (const bool sampled : {false, true}) {
    const Result r = tfm_run(bench + (sampled ? " --do-sample" : ""), false);
    ASSERT_EQ(r.status, 0) << r.out;
    const tfm::json::Value out = tfm::json::parse(r.out);
    EXPECT_EQ(out.at("do_sample").as_bool(), sampled);
    EXPECT_NEAR(out.at("decode_tokens_per_s").as_double() * out.at("decode_seconds").as_double(), 6.0, 1e-6);
  }
}

TEST(Cli, BadArgumentsAndFoldersAreErrors) {
  for (const std::string& args : std::vector<std::string>{
           "generate --model /no/such/folder --ids 1", "generate --model " + kModel + " --ids 1,x",
           "forward --model " + kModel + " --ids 1 --bogus", "forward --model " + kModel + " --ids 99999",
           "forward --model " + kModel + " --ids 1 --device cuda:7",
           "forward --model " + kModel + " --ids 1 --dtype int8", "nonsense"}) {
    const Result r = tfm_run(args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.out.find("error: "), std::string::npos) << args << "\n" << r.out;
  }
}

TEST(Cli, EveryCommandHasHelp) {
  const Result top = tfm_run("--help");
  ASSERT_EQ(top.status, 0);
  size_t listed = 0;
  for (const std::string command :
       {"generate", "chat", "forward", "devices", "tokenize", "detokenize", "chat-template"}) {
    EXPECT_NE(top.out.find(command), std::string::npos);
    const Result r = tfm_run(command + " --help");
    EXPECT_EQ(r.status, 0) << command;
    EXPECT_NE(r.out.find("usage: tfm " + command), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--quiet"), std::string::npos) << r.out;
    ++listed;
  }
  EXPECT_EQ(listed, 7u);
}

// The first word of a two-word command alone, with --help, or with an unknown second word names the second
// words.
TEST(Cli, BenchAloneNamesItsSubcommands) {
  for (const std::string args : {"bench", "bench --help", "bench nonsense"}) {
    const Result r = tfm_run(args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_NE(r.out.find("error: 'tfm bench' takes one of: throughput, serve, latency"), std::string::npos)
        << args << "\n"
        << r.out;
  }
}

TEST(Cli, PrintsItsVersion) {
  for (const std::string args : {"--version", "version"}) {
    const Result r = tfm_run(args);
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out, "tfm " TFM_VERSION "\n");
  }
}

// tokenize, detokenize and chat-template take the model as generate does: the demo model by default, or a
// folder, or a Hub id (offline here, so the Hub cache is asked and lacks it).
TEST(Cli, EveryCommandTakesTheSameModelArgument) {
  const Result tokenize = tfm_run("tokenize <<'EOF'\n[\"The old man said\"]\nEOF", false);
  ASSERT_EQ(tokenize.status, 0) << tokenize.out;
  const Result same = tfm_run("tokenize --model " + kDemo + " <<'EOF'\n[\"The old man said\"]\nEOF", false);
  EXPECT_EQ(tokenize.out, same.out);
  const Result back = tfm_run("detokenize <<'EOF'\n" + tokenize.out + "EOF", false);
  EXPECT_EQ(back.out, "[\"The old man said\"]\n");
  const Result chat = tfm_run(R"(chat-template <<'EOF'
{"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true}
EOF)",
                              false);
  EXPECT_EQ(chat.status, 0) << chat.out;
  EXPECT_NE(chat.out.find("Hi"), std::string::npos) << chat.out;
  for (const std::string command : {"tokenize", "detokenize", "chat-template"}) {
    const Result hub = shell("HF_HUB_OFFLINE=1 HF_HUB_CACHE=/nonexistent " + std::string(TFM_BINARY) + " " +
                             command + " --model tfm-test/absent </dev/null 2>&1");
    EXPECT_NE(hub.out.find("cannot find 'tfm-test/absent' (revision 'main') in the Hub cache"),
              std::string::npos)
        << command << ": " << hub.out;
  }
}

// Transformers' decode leaves ids outside the vocabulary out; tfm does too, and says so (unless --quiet).
TEST(Cli, DetokenizeWarnsAboutIdsOutsideTheVocabulary) {
  const std::string input = " <<'EOF'\n[[5, 99999, 6]]\nEOF";
  const Result quiet = tfm_run("detokenize --quiet" + input);
  ASSERT_EQ(quiet.status, 0) << quiet.out;
  EXPECT_EQ(quiet.out, "[\"#$\"]\n");
  const Result r = tfm_run("detokenize" + input);
  EXPECT_EQ(r.out, "warning: stdin element 0: ids 99999 are not in the vocabulary of " + kDemo +
                       " and decode to nothing, as in Transformers\n[\"#$\"]\n");
  const Result negative = tfm_run("detokenize <<'EOF'\n[[5, -1]]\nEOF");
  EXPECT_EQ(negative.status, 1);
  EXPECT_EQ(negative.out, "error: token id -1: number too small to fit in target type\n");
}

// A bad generation option is an error before anything is printed, naming the flag the user typed.
TEST(Cli, GenerationOptionErrorsComeFirstAndNameTheFlag) {
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--max-new-tokens 0", "error: --max-new-tokens must be greater than 0, but is 0.\n"},
           {"--do-sample --top-p 2", "error: --top-p has to be a float > 0 and < 1, but is 2.0\n"},
           {"--repetition-penalty 0",
            "error: --repetition-penalty has to be a strictly positive float, but is 0.0\n"},
           {"--device ''", "error: Device string must not be empty\n"}}) {
    for (const std::string command : {"generate --prompt \"The old man said\" ", "chat "}) {
      const Result r = tfm_run(command + args + " </dev/null");
      EXPECT_EQ(r.status, 1) << command << args;
      EXPECT_EQ(r.out, message) << command << args;
    }
  }
}

TEST(Cli, ChatConfirmsResetAndRejectsUnknownCommands) {
  const Result r = tfm_run("chat --quiet --max-new-tokens 2 <<'EOF'\n/reset\n/help me\n/exit\nEOF");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out,
            "> (conversation reset)\n> (unknown command /help: /reset starts over, /exit ends; start a "
            "message with a space to send it as it is)\n> ");
}

// Warnings and status lines honour TRANSFORMERS_VERBOSITY and --quiet; results do not.
TEST(Cli, QuietAndVerbosityLeaveOnlyResults) {
  const std::string generate = "generate --ids 1,2,3 --max-new-tokens 2 --top-k 3 --json";
  const Result loud = tfm_run(generate);
  ASSERT_EQ(loud.status, 0) << loud.out;
  EXPECT_NE(
      loud.out.find("warning: The following generation flags are not valid and may be ignored: ['top_k']."),
      std::string::npos)
      << loud.out;
  EXPECT_NE(loud.out.find(" tokens/s\n"), std::string::npos) << loud.out;
  const Result quiet = tfm_run(generate + " --quiet");
  ASSERT_EQ(quiet.status, 0) << quiet.out;
  EXPECT_EQ(quiet.out.find("warning"), std::string::npos) << quiet.out;
  EXPECT_EQ(quiet.out.find("tokens/s"), std::string::npos) << quiet.out;
  EXPECT_NO_THROW(tfm::json::parse(quiet.out));
  const Result error_level =
      shell("TRANSFORMERS_VERBOSITY=error " + std::string(TFM_BINARY) + " " + generate + " 2>&1");
  EXPECT_EQ(error_level.out.find("warning"), std::string::npos) << error_level.out;
  const Result info =
      shell("TRANSFORMERS_VERBOSITY=info " + std::string(TFM_BINARY) + " " + generate + " 2>&1");
  EXPECT_NE(info.out.find("info: - `top_k`: `do_sample` is not set to `True`."), std::string::npos)
      << info.out;
}

}  // namespace

TEST(Cli, KernelsListsEveryRegisteredKernelAsJson) {
  const Result r = tfm_run("kernels --device cpu --json", false);
  ASSERT_EQ(r.status, 0) << r.out;
  const tfm::json::Value list = tfm::json::parse(r.out);
  ASSERT_GT(list.size(), 0u);
  bool linear_reference = false, fused_norm = false;
  for (const auto& k : list.as_array()) {
    for (const char* field : {"op", "device", "dtype", "variant", "default", "layer", "use_kernels", "modes"})
      ASSERT_TRUE(k.contains(field)) << field;
    EXPECT_EQ(k.at("device").as_string(), "cpu");
    linear_reference |= k.at("op").as_string() == "linear" && k.at("variant").as_string() == "reference" &&
                        k.at("dtype").as_string() == "bfloat16" && !k.at("default").as_bool();
    fused_norm |= k.at("layer").as_string() == "RMSNorm" && k.at("variant").as_string() == "fused" &&
                  k.at("use_kernels").as_bool();
  }
  EXPECT_TRUE(linear_reference);
  EXPECT_TRUE(fused_norm);
}

TEST(Cli, KernelsFlagSelectsVariantsAndRejectsUnknownOnes) {
  const Result ok = tfm_run(
      "generate --prompt \"The old man said\" --max-new-tokens 40 --device cpu --kernels "
      "'{\"RMSNorm\": \"fused\", \"Linear\": {\"cpu\": \"reference\"}}'",
      false);
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_EQ(ok.out, demo_reference_text("bfloat16") + "\n");
  const Result bad =
      tfm_run("generate --prompt hi --device cpu --kernels '{\"RMSNorm\": {\"cpu\": \"fast\"}}'");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(
      bad.out.find("error: KernelConfig: RMSNorm has no variant 'fast' on cpu; variants: default, fused"),
      std::string::npos)
      << bad.out;
  const Result layer = tfm_run("forward --ids 1,2 --device cpu --kernels '{\"LayerNorm\": \"fused\"}'");
  EXPECT_NE(layer.status, 0);
  EXPECT_NE(layer.out.find("'LayerNorm' is not a layer kind tfm has kernels for; layer kinds: Attention, "
                           "Embedding, Linear, RMSNorm, RotaryEmbedding, SiLUAndMul"),
            std::string::npos)
      << layer.out;
}

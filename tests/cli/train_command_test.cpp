// `tfm train` and `tfm merge-adapter` as a user runs them: on the demo model with a few text records, one JSON
// object per log on stdout, the folders they write (which `tfm generate` loads), Transformers' argument errors
// and its bf16 check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/demo_model.h"
#include "support/scratch_dir.h"
#include "support/shell.h"
#include "tfm/io/json.h"

namespace tfm {
namespace {

using test_support::kDemoModel;
using test_support::shell;

test_support::ShellResult tfm_run(const std::string& args) {
  return shell(std::string(TFM_BINARY) + " " + args + " 2>&1");
}

std::string records(const testing::ScratchDir& dir) {
  const std::string path = dir / "data.jsonl";
  std::ofstream out(path);
  for (int i = 0; i < 12; ++i)
    out << R"({"text": "The old man said that the boat was ready, and she walked to the market in the morning."})"
        << "\n";
  return path;
}

// The JSON objects of a run's output, each a line of its own.
std::vector<json::Value> logs(const std::string& out) {
  std::vector<json::Value> entries;
  size_t start = 0;
  while (start < out.size()) {
    const size_t end = std::min(out.find('\n', start), out.size());
    if (out[start] == '{') entries.push_back(json::parse(out.substr(start, end - start)));
    start = end + 1;
  }
  return entries;
}

TEST(TrainCommand, FineTunesIntoAFolderThatGenerates) {
  testing::ScratchDir dir;
  const std::string common = "train --model " + kDemoModel + " --data " + records(dir) +
                             " --max-seq-length 32 --use_cpu --per-device-train-batch-size 2 --max_steps 4 "
                             "--logging_steps 2 --save_steps 2 --save_total_limit 1 --learning_rate 1e-3 --quiet";
  const auto r = tfm_run(common + " --output-dir " + (dir / "out"));
  ASSERT_EQ(r.status, 0) << r.out;
  const std::vector<json::Value> entries = logs(r.out);
  ASSERT_EQ(entries.size(), 3u) << r.out;  // steps 2 and 4, then the summary
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(entries[i].at("step").as_int(), 2 * (i + 1));
    for (const char* key : {"loss", "grad_norm", "learning_rate", "epoch"}) EXPECT_TRUE(entries[i].contains(key)) << key;
  }
  EXPECT_LT(entries[1].at("loss").as_double(), entries[0].at("loss").as_double());
  EXPECT_TRUE(entries[2].contains("train_runtime"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out/checkpoint-2")) << "save_total_limit 1 keeps the newest";
  EXPECT_TRUE(std::filesystem::exists(dir / "out/checkpoint-4/optimizer.safetensors"));
  const auto generated = tfm_run("generate --model " + (dir / "out") + " --prompt 'The old man' --max-new-tokens 5 --quiet");
  EXPECT_EQ(generated.status, 0) << generated.out;

  // LoRA: the adapter folder loads with --adapter and merges into a model folder.
  const auto lora = tfm_run(common + " --output-dir " + (dir / "lora") + " --lora-r 4 --lora-target-modules all-linear");
  ASSERT_EQ(lora.status, 0) << lora.out;
  EXPECT_TRUE(std::filesystem::exists(dir / "lora/adapter_model.safetensors"));
  const std::string forward = " --ids 5,6,7 --device cpu --dtype float32 --json --quiet";
  const auto adapted = shell(std::string(TFM_BINARY) + " forward --model " + kDemoModel + " --adapter " + (dir / "lora") +
                             forward + " 2>/dev/null");
  const auto merge = tfm_run("merge-adapter --model " + kDemoModel + " --adapter " + (dir / "lora") +
                             " --output-dir " + (dir / "merged"));
  ASSERT_EQ(merge.status, 0) << merge.out;
  const auto merged = shell(std::string(TFM_BINARY) + " forward --model " + (dir / "merged") + forward + " 2>/dev/null");
  ASSERT_EQ(adapted.status, 0) << adapted.out;
  ASSERT_EQ(merged.status, 0) << merged.out;
  const json::Value a = json::parse(adapted.out), m = json::parse(merged.out);
  ASSERT_EQ(a.at("last_logits").size(), m.at("last_logits").size());
  // The merged weights are stored in the demo's bfloat16: equal within its rounding (of the largest logit).
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.at("last_logits").size(); ++i) {
    const double x = a.at("last_logits")[i].as_double();
    diff = std::max(diff, std::fabs(x - m.at("last_logits")[i].as_double()));
    scale = std::max(scale, std::fabs(x));
  }
  EXPECT_LT(diff, 1e-2 * scale);
}

TEST(TrainCommand, ArgumentErrorsAreTransformers) {
  testing::ScratchDir dir;
  const std::string base = "train --model " + kDemoModel + " --data " + records(dir) + " --output-dir " + (dir / "out");
  const auto unknown = tfm_run(base + " --use_cpu --no_such_flag 3");
  EXPECT_NE(unknown.status, 0);
  EXPECT_NE(unknown.out.find("Some specified arguments are not used by the HfArgumentParser: ['--no_such_flag', '3']"),
            std::string::npos)
      << unknown.out;
  const auto both = tfm_run(base + " --use_cpu --bf16 --fp16");
  EXPECT_NE(both.out.find("At most one of fp16 and bf16 can be True, but not both"), std::string::npos) << both.out;
  // Without a GPU, bf16 off the cpu is Transformers' error (use_cpu allows it).
  const auto bf16 = shell("CUDA_VISIBLE_DEVICES= OCL_ICD_VENDORS=/nonexistent " + std::string(TFM_BINARY) + " " + base +
                          " --bf16 2>&1");
  EXPECT_NE(bf16.status, 0);
  EXPECT_NE(bf16.out.find("Your setup doesn't support bf16/gpu."), std::string::npos) << bf16.out;
}

}  // namespace
}  // namespace tfm

// TrainingArguments against what Transformers' HfArgumentParser and TrainingArguments make of the same command
// lines and JSON configs (tests/fixtures/training_args_cases.json, from make_training_args_references.py).
#include "tfm/train/training_args.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>

#include "support/error_of.h"
#include "support/scratch_dir.h"
#include "tfm/core/error.h"

namespace tfm {
namespace {

using test_support::error_of;

// Values equal as Python compares them: 10 == 10.0, recursively.
bool same(const json::Value& a, const json::Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, value] : a.as_object()) {
      const json::Value* other = b.find(key);
      if (!other || !same(value, *other)) return false;
    }
    return true;
  }
  return a == b;
}

// Where tfm refuses on purpose what Transformers leaves to torch to refuse later (with torch's message).
const std::map<std::string, std::string>& tfm_refusals() {
  static const std::map<std::string, std::string> refusals = {
      {R"(["--learning_rate","-0.5"])", "Invalid learning rate: -0.5"},
  };
  return refusals;
}

TEST(TrainingArguments, MatchesTransformersOnEveryRecordedCase) {
  ::setenv("HOME", "/home/user", 1);  // the script ran with this HOME, for the "~" case
  const json::Value refs = json::parse_file(std::string(TFM_SOURCE_DIR) + "/tests/fixtures/training_args_cases.json");
  size_t checked = 0;
  for (const json::Value& c : refs.at("cases").as_array()) {
    const bool command_line = c.contains("args");
    const std::string label = json::dump_compact(command_line ? c.at("args") : c.at("json"));
    SCOPED_TRACE(label);
    std::optional<TrainingArguments> args;
    const std::string error = error_of([&] {
      if (command_line) {
        std::vector<std::string> tokens;
        for (const json::Value& t : c.at("args").as_array()) tokens.push_back(t.as_string());
        args = TrainingArguments::parse(tokens);
      } else {
        args = TrainingArguments::from_json(c.at("json"));
      }
    });
    if (const auto refusal = tfm_refusals().find(label); refusal != tfm_refusals().end()) {
      EXPECT_EQ(error, refusal->second);
    } else if (c.contains("error")) {
      EXPECT_EQ(error, c.at("error").as_string());
    } else {
      ASSERT_EQ(error, "(no error)");
      const json::Value mine = args->to_json();
      for (const auto& [field, expected] : c.at("expect").as_object()) {
        const json::Value* got = mine.find(field);
        ASSERT_NE(got, nullptr) << field;
        EXPECT_TRUE(same(*got, expected)) << field << ": " << json::dump(*got) << " vs " << json::dump(expected);
      }
      EXPECT_EQ(mine.size(), c.at("expect").size());
    }
    ++checked;
  }
  EXPECT_GT(checked, 60u);
}

TEST(TrainingArguments, CommandLineOverridesTheConfigFile) {
  testing::ScratchDir dir;
  const std::string config = dir / "args.json";
  std::ofstream(config) << R"({"learning_rate": 1e-4, "num_train_epochs": 2, "bf16": true, "eval_strategy": "steps",
                               "logging_steps": 20})";
  const TrainingArguments args = TrainingArguments::parse({"--learning-rate", "3e-4", "--bf16", "false"}, config);
  EXPECT_EQ(args.learning_rate, 3e-4);
  EXPECT_EQ(args.num_train_epochs, 2.0);
  EXPECT_FALSE(args.bf16);
  EXPECT_EQ(args.eval_steps, 20.0);  // from the file's logging_steps, after both were read
}

TEST(TrainingArguments, ConfigFileErrorsNameTheFileAndKey) {
  testing::ScratchDir dir;
  const std::string config = dir / "args.json";
  std::ofstream(config) << R"({"learning_rate": "fast", "zeta": 1, "alpha": 2})";
  EXPECT_EQ(error_of([&] { TrainingArguments::parse({}, config); }),
            config + ": training arguments: `learning_rate` must be a number, found a string");
  std::ofstream(config) << R"({"learning_rate": 1e-4, "zeta": 1, "alpha": 2})";
  EXPECT_EQ(error_of([&] { TrainingArguments::parse({}, config); }),
            config + ": Some keys are not used by the HfArgumentParser: ['alpha', 'zeta']");
  EXPECT_NE(error_of([&] { TrainingArguments::parse({}, dir / "missing.json"); }).find("missing.json"),
            std::string::npos);
}

TEST(TrainingArguments, RefusesWhatTfmDoesNotImplement) {
  EXPECT_EQ(error_of([] { TrainingArguments::parse({"--lr_scheduler_type", "reduce_lr_on_plateau"}); }),
            "lr_scheduler_type reduce_lr_on_plateau is not supported by tfm: it follows evaluation metrics");
  EXPECT_EQ(error_of([] { TrainingArguments::from_json(json::parse(R"({"save_strategy": "best"})")); }),
            "save_strategy best is not supported by tfm: it saves on the best evaluation metric, which tfm does "
            "not track");
  EXPECT_EQ(error_of([] { TrainingArguments::parse({"--report_to", "wandb"}); }),
            "report_to wandb is not supported: tfm reports to no integration (use \"none\")");
}

TEST(TrainingArguments, RefusesWhatTorchWouldRefuseLater) {
  EXPECT_EQ(error_of([] { TrainingArguments::parse({"--per_device_train_batch_size", "0"}); }),
            "batch_size should be a positive integer value, but got batch_size=0");
  EXPECT_EQ(error_of([] { TrainingArguments::parse({"--gradient_accumulation_steps", "0"}); }),
            "gradient_accumulation_steps must be a positive integer, but got 0");
  EXPECT_EQ(error_of([] { TrainingArguments::parse({"--adam_beta2", "1"}); }),
            "Invalid beta parameter at index 1: 1.0");
  EXPECT_EQ(error_of([] { TrainingArguments::parse({"--weight_decay", "-0.1"}); }),
            "Invalid weight_decay value: -0.1");
}

TEST(TrainingArguments, WarmupStepsBelowOneAreARatio) {
  TrainingArguments args;
  args.warmup_steps = 0.1;
  EXPECT_EQ(args.get_warmup_steps(95), 10);  // ceil(9.5)
  args.warmup_steps = 7;
  EXPECT_EQ(args.get_warmup_steps(95), 7);
  args.warmup_steps = 0;
  EXPECT_EQ(args.get_warmup_steps(95), 0);
}

TEST(TrainingArguments, ToJsonReadsBackTheSame) {
  const TrainingArguments args = TrainingArguments::parse(
      {"--output_dir", "run", "--lr_scheduler_type", "cosine", "--lr_scheduler_kwargs", R"({"num_cycles": 0.25})",
       "--save_total_limit", "2", "--eval_strategy", "epoch", "--data_seed", "5", "--resume_from_checkpoint", "true"});
  const json::Value written = args.to_json();
  EXPECT_EQ(written.as_object().front().first, "output_dir");  // Transformers' field order
  EXPECT_EQ(TrainingArguments::from_json(written).to_json(), written);
}

}  // namespace
}  // namespace tfm

// The Trainer on each device: checkpoints written mid-run there (the optimizer's state lives on the device)
// and a resume from one that continues the run. xpu runs on the OpenCL test platform; cuda when a GPU is
// present; an absent device skips.
#include <gtest/gtest.h>

#include <filesystem>

#include "../model/parity_fixtures.h"
#include "../xpu/test_platform.h"
#include "support/scratch_dir.h"
#include "tfm/io/json.h"
#include "tfm/train/trainer.h"

namespace tfm {
namespace {

class DeviceTrainer : public ::testing::TestWithParam<DeviceType> {
 protected:
  void SetUp() override {
    if (GetParam() == DeviceType::xpu) {
      if (!xpu::seam_test_device())
        GTEST_SKIP() << "no OpenCL device on platform '" << xpu::test_platform() << "'";
    } else {
      Backend* b = find_backend(GetParam());
      if (!b || b->device_count() == 0) GTEST_SKIP() << "no " << device_type_name(GetParam()) << " device";
    }
  }

  CausalLM load() const {
    LoadOptions options;
    options.dtype = "float32";
    options.device = std::string(device_type_name(GetParam())) + ":0";
    options.progress = false;
    return CausalLM::from_pretrained(parity::kFixtures + kModel, options);
  }

  static constexpr const char* kModel = "qwen3_head_dim_sliding";
};

// Four steps of two examples, a checkpoint every two.
TrainingArguments four_steps(const std::string& output_dir) {
  TrainingArguments args;
  args.output_dir = output_dir;
  args.max_steps = 4;
  args.per_device_train_batch_size = 2;
  args.learning_rate = 1e-3;
  args.logging_steps = 1;
  args.save_strategy = IntervalStrategy::steps;
  args.save_steps = 2;
  return args;
}

std::vector<TrainingExample> examples() {
  std::vector<TrainingExample> out;
  for (int32_t i = 0; i < 8; ++i) {
    TrainingExample e;
    for (int32_t j = 0; j < 6 + i; ++j) e.input_ids.push_back((i * 37 + j * 11) % 250 + 1);
    e.labels = e.input_ids;
    out.push_back(std::move(e));
  }
  return out;
}

TEST_P(DeviceTrainer, CheckpointsMidRunAndResumesFromThem) {
  testing::ScratchDir dir;
  const std::string fixture = parity::kFixtures + kModel;
  CausalLM whole_model = load();
  Trainer whole(whole_model, four_steps(dir / "whole"), full_model_weights(whole_model, fixture), examples());
  whole.train();
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "trainer_state.json"})
    EXPECT_TRUE(std::filesystem::exists(dir / ("whole/checkpoint-2/" + std::string(file)))) << file;

  TrainingArguments resumed_args = four_steps(dir / "resumed");
  resumed_args.resume_from_checkpoint = dir / "whole/checkpoint-2";
  CausalLM resumed_model = load();
  Trainer resumed(resumed_model, resumed_args, full_model_weights(resumed_model, fixture), examples());
  resumed.train();
  const auto& a = whole.state().log_history;
  const auto& b = resumed.state().log_history;
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 2; i + 1 < a.size(); ++i) {  // steps 3 and 4; the last entry is the summary
    const double want = json::Value(a[i]).at("loss").as_double();
    EXPECT_NEAR(json::Value(b[i]).at("loss").as_double(), want, 1e-5 * want) << "step " << i + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceTrainer, ::testing::Values(DeviceType::xpu, DeviceType::cuda),
                         [](const auto& info) { return std::string(device_type_name(info.param)); });

}  // namespace
}  // namespace tfm

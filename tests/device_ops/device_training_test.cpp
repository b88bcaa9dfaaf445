// The Trainer on each device: checkpoints written mid-run there (the optimizer's state lives on the device)
// and a resume from one that continues the run; LoRA's step against the CPU's. xpu runs on the OpenCL test
// platform; cuda when a GPU is present; an absent device skips.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "../model/parity_fixtures.h"
#include "../xpu/test_platform.h"
#include "support/scratch_dir.h"
#include "tfm/io/json.h"
#include "tfm/model/lora.h"
#include "tfm/model/lora_config.h"
#include "tfm/train/adamw.h"
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

// LoRA on the device: one training step's loss and every adapter's gradients against the CPU's (which
// tests/model holds to finite differences and PEFT), for adapters on every linear layer (stacked and lone, B
// random so that every product is exercised) and one adapter with dropout; on the device with the gradients
// apart and in the optimizer's arena, where a Linear's A gradients are the rows of one matrix the backward
// writes in place.
TEST_P(DeviceTrainer, LoraGradientsMatchTheCpus) {
  const std::vector<TrainingExample> data = examples();
  const std::vector<const TrainingExample*> batch = {&data[0], &data[5]};
  for (const char* config :
       {R"({"r": 4, "lora_alpha": 8, "target_modules": "all-linear"})",
        R"({"r": 2, "lora_alpha": 4, "lora_dropout": 0.25, "target_modules": ["v_proj"]})"}) {
    auto step = [&](const std::string& device, bool in_arena,
                    std::vector<std::pair<std::string, Tensor>>& grads) {
      LoadOptions options;
      options.dtype = "float32";
      options.device = device;
      options.progress = false;
      CausalLM model = CausalLM::from_pretrained(parity::kFixtures + kModel, options);
      const auto adapters = attach_lora(model, LoraConfig::from_json(json::parse(config)), 7);
      std::mt19937 rng(3);
      std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
      Gradients apart;
      std::vector<TrainedTensor> trained;
      for (const auto& [name, t] : adapters) {
        if (name.ends_with("lora_B.weight")) {
          Tensor host = Tensor::cpu(t.shape(), DType::float32);
          for (int64_t i = 0; i < host.numel(); ++i) host.data<float>()[i] = dist(rng);
          Tensor b = t;
          ops::cast(to_device(host, model.device()), b);
        }
        apart.add(name, to_device(Tensor::cpu(t.shape(), DType::float32), model.device()));
        trained.push_back({name, t, {}});
      }
      AdamW optimizer({}, trained);
      Gradients& g = in_arena ? optimizer.gradients() : apart;
      model.train();
      const double loss = model.forward_backward(batch, 0.5f, g).loss_sum;
      for (const auto& [name, t] : g.all()) grads.emplace_back(name, to_device(t, Device{}));
      return loss;
    };
    std::vector<std::pair<std::string, Tensor>> on_cpu;
    const double cpu_loss = step("cpu", false, on_cpu);
    for (const bool in_arena : {false, true}) {
      const std::string what = std::string(config) + (in_arena ? " in the optimizer's arena" : " apart");
      std::vector<std::pair<std::string, Tensor>> on_device;
      const double device_loss = step(std::string(device_type_name(GetParam())) + ":0", in_arena, on_device);
      EXPECT_NEAR(device_loss, cpu_loss, 1e-4 * cpu_loss) << what;
      parity::expect_gradients_near(on_device, on_cpu, 1e-4, what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceTrainer, ::testing::Values(DeviceType::xpu, DeviceType::cuda),
                         [](const auto& info) { return std::string(device_type_name(info.param)); });

}  // namespace
}  // namespace tfm

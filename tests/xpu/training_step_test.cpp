// A whole training step on the xpu test device: CausalLM::forward_backward on a fixture model in float32
// gives the CPU's loss and every parameter's gradient (tests/train checks the CPU against Transformers), on
// the batch of tests/fixtures/train/gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/parity_fixtures.h"
#include "tfm/backend/backend.h"
#include "tfm/io/json.h"
#include "tfm/model/layers.h"
#include "xpu/test_platform.h"

namespace tfm::xpu {
namespace {

CausalLM load_float32(const std::string& name, Device device) {
  LoadOptions options;
  options.dtype = "float32";
  options.device = device.str();
  options.progress = false;
  return CausalLM::from_pretrained(parity::kFixtures + name, options);
}

std::vector<TrainingExample> reference_batch(const std::string& name) {
  const json::Value ref =
      json::parse_file(std::string(TFM_SOURCE_DIR) + "/tests/fixtures/train/gradients/" + name + ".json");
  std::vector<TrainingExample> batch;
  for (const json::Value& e : ref.at("sequences").as_array()) {
    TrainingExample ex;
    for (const json::Value& v : e.at("input_ids").as_array())
      ex.input_ids.push_back(static_cast<int32_t>(v.as_int()));
    for (const json::Value& v : e.at("labels").as_array())
      ex.labels.push_back(static_cast<int32_t>(v.as_int()));
    batch.push_back(std::move(ex));
  }
  return batch;
}

// The loss of one forward_backward on `device`, and each parameter's gradient (by name, on the host).
struct Step {
  StepLoss loss;
  std::vector<std::pair<std::string, Tensor>> grads;
};

Step training_step(const std::string& name, Device device) {
  CausalLM model = load_float32(name, device);
  EXPECT_EQ(model.device().str(), device.str());
  const std::vector<TrainingExample> batch = reference_batch(name);
  std::vector<const TrainingExample*> pointers;
  for (const TrainingExample& e : batch) pointers.push_back(&e);
  Gradients grads;
  for (const Parameter& p : model.parameters()) {
    const Tensor g = to_device(Tensor::cpu(p.value.shape(), DType::float32), device);
    grads.add(p.name, g);
    if (p.name == "model.embed_tokens.weight" && model.config().tie_word_embeddings)
      grads.add("lm_head.weight", g);
  }
  Step step{model.forward_backward(pointers, 0.1f, grads), {}};
  for (const Parameter& p : model.parameters())
    step.grads.emplace_back(p.name, to_device(grads.of(p.name), Device{}));
  return step;
}

class TrainingStep : public OnTestDevice<testing::TestWithParam<std::string>> {};

TEST_P(TrainingStep, LossAndEveryGradientMatchTheCpu) {
  const Step want = training_step(GetParam(), Device{});
  const Step got = training_step(GetParam(), device_);
  EXPECT_EQ(got.loss.items, want.loss.items);
  EXPECT_NEAR(got.loss.loss_sum, want.loss.loss_sum, 1e-5 * want.loss.loss_sum);
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < want.grads.size(); ++i) {
    const Tensor& g = got.grads[i].second;
    const Tensor& w = want.grads[i].second;
    ASSERT_EQ(g.shape(), w.shape()) << want.grads[i].first;
    double diff = 0, scale = 0;
    for (int64_t e = 0; e < w.numel(); ++e) {
      const double d = std::fabs(double{g.data<float>()[e]} - w.data<float>()[e]);
      diff = std::isnan(d) ? INFINITY : std::max(diff, d);  // a NaN fails, as no max keeps it
      scale = std::max(scale, std::fabs(double{w.data<float>()[e]}));
    }
    EXPECT_GT(scale, 0) << want.grads[i].first << " has no gradient to compare";
    EXPECT_LE(diff, 1e-4 * scale) << want.grads[i].first << ": max error " << diff << " at scale " << scale;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TrainingStep, testing::Values("llama_gqa", "qwen3_head_dim_sliding"));

}  // namespace
}  // namespace tfm::xpu

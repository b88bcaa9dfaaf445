// The forward pass on every device against Transformers, through the same parity fixtures and checks as the
// CPU (tests/model/parity_test.cpp), in float32, bfloat16 and float16: GQA, head_dim != hidden / heads, QK-norm
// and sliding-window layers. xpu
// runs on the OpenCL test platform; cuda when a GPU is present; an absent device skips.
#include <gtest/gtest.h>

#include "../model/parity_fixtures.h"
#include "tfm/model/layers.h"
#include "../xpu/test_platform.h"

namespace tfm {
namespace {

class DeviceParity : public testing::TestWithParam<std::tuple<DeviceType, std::string>> {
 protected:
  void SetUp() override {
    const DeviceType type = std::get<0>(GetParam());
    if (type == DeviceType::xpu) {
      if (!xpu::seam_test_device())
        GTEST_SKIP() << "no OpenCL device on platform '" << xpu::test_platform() << "'";
    } else {
      Backend* b = find_backend(type);
      if (!b || b->device_count() == 0) GTEST_SKIP() << "no " << device_type_name(type) << " device";
    }
  }
  std::string device() const { return std::string(device_type_name(std::get<0>(GetParam()))) + ":0"; }
  const std::string& model() const { return std::get<1>(GetParam()); }
};

TEST_P(DeviceParity, LogitsAndGreedyTokensMatchTransformers) {
  parity::expect_logits_and_greedy_tokens(model(), device());
}

TEST_P(DeviceParity, BFloat16AndFloat16LogitsMatchTransformers) {
  parity::expect_dtype_parity(model(), device(), "bfloat16");
  parity::expect_dtype_parity(model(), device(), "float16");
}

// Allocator statistics, not timing: bf16 weights take half the device memory of float32 ones.
TEST_P(DeviceParity, BFloat16WeightsTakeHalfTheDeviceMemory) {
  const Device d = Device::parse(device());
  Backend& backend = *find_backend(d.type);
  auto allocated_by = [&](const std::string& dtype) {
    const size_t before = backend.memory_allocated(d.index_or_zero());
    CausalLM m = CausalLM::from_pretrained(parity::kFixtures + model(), {.dtype = dtype, .device = device()});
    return static_cast<double>(backend.memory_allocated(d.index_or_zero()) - before);
  };
  const double f32 = allocated_by("float32"), bf16 = allocated_by("bfloat16");
  EXPECT_GT(bf16, 0);
  EXPECT_NEAR(bf16 / f32, 0.5, 0.01) << bf16 << " bytes against " << f32;
}

TEST_P(DeviceParity, RaggedBatchEqualsSeparateSequences) {
  if (model() == "llama_dynamic_rope") GTEST_SKIP() << "dynamic RoPE depends on the longest sequence in a batch";
  parity::expect_ragged_batch(model(), device());
}

// Decode steps of a ragged batch (three sequences, so the graph pads to four) with device graphs and kernel by
// kernel: the same greedy tokens in float32, logits as close as the kernels' summation order allows (bf16
// compares one step: a near tie may round either way and send the sequences apart).
TEST_P(DeviceParity, DecodeGraphsGiveWhatKernelByKernelStepsGive) {
  if (model() == "llama_dynamic_rope") GTEST_SKIP() << "dynamic RoPE steps never run as graphs";
  for (const std::string dtype : {"float32", "bfloat16"}) {
    auto decode = [&](bool graphs, std::vector<std::vector<float>>& last_logits) {
      CausalLM m = CausalLM::from_pretrained(parity::kFixtures + model(), {.dtype = dtype, .device = device()});
      m.set_device_graphs(graphs);
      const std::vector<parity::Prompt> prompts = parity::reference(model());
      KVCache cache = m.make_cache(64, 4);
      std::vector<SequenceCache> seqs(3);
      std::vector<std::vector<int64_t>> next(3), tokens(3);
      for (size_t i = 0; i < 3; ++i) next[i] = prompts[i % prompts.size()].ids;
      for (int step = 0; step < (dtype == "float32" ? 8 : 2); ++step) {
        BatchBuilder builder(cache);
        for (size_t i = 0; i < 3; ++i) builder.add(seqs[i], next[i], Logits::last);
        const Tensor logits = m.forward(builder.finish(), cache);
        const int64_t V = logits.size(1);
        last_logits.clear();
        for (size_t i = 0; i < 3; ++i) {
          const float* row = logits.data<float>() + static_cast<int64_t>(i) * V;
          next[i] = {parity::argmax(row, V)};
          tokens[i].push_back(next[i][0]);
          last_logits.emplace_back(row, row + V);
        }
      }
      return tokens;
    };
    std::vector<std::vector<float>> with_graphs, without;
    EXPECT_EQ(decode(true, with_graphs), decode(false, without)) << dtype;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_LT(parity::relative_error(with_graphs[i].data(), without[i]), dtype == "float32" ? 1e-5 : 2e-2)
          << dtype << " sequence " << i;
    }
  }
}

// One training step's loss and every parameter's gradient on the device against the CPU's (which
// tests/train holds to Transformers'), in float32 and, looser, bfloat16 with float32 accumulators.
TEST_P(DeviceParity, TrainingGradientsMatchTheCpus) {
  const std::vector<TrainingExample> examples = {{{5, 17, 99, 3, 250, 8, 11, 64, 2}, {5, 17, -100, 3, 250, 8, -100, 64, 2}},
                                                 {{42, 7, 311, 19, 23, 1, 0}, {42, 7, 311, 19, 23, 1, 0}}};
  const std::vector<const TrainingExample*> batch = {&examples[0], &examples[1]};
  for (const std::string dtype : {"float32", "bfloat16"}) {
    auto step = [&](const std::string& on, std::vector<std::pair<std::string, Tensor>>& grads) {
      CausalLM m = CausalLM::from_pretrained(parity::kFixtures + model(), {.dtype = dtype, .device = on});
      Gradients g;
      for (const Parameter& p : m.parameters()) {
        const Tensor host = Tensor::cpu(p.value.shape(), DType::float32);
        const Tensor acc = to_device(host, m.device());
        g.add(p.name, acc);
        if (p.name == "model.embed_tokens.weight" && m.config().tie_word_embeddings) g.add("lm_head.weight", acc);
      }
      const double loss = m.forward_backward(batch, 0.1f, g).loss_sum;
      for (const auto& [name, t] : g.all()) grads.emplace_back(name, to_device(t, Device{}));
      return loss;
    };
    std::vector<std::pair<std::string, Tensor>> on_device, on_cpu;
    const double device_loss = step(device(), on_device), cpu_loss = step("cpu", on_cpu);
    const double tol = dtype == "float32" ? 1e-4 : 3e-2;
    EXPECT_NEAR(device_loss, cpu_loss, tol * cpu_loss) << dtype;
    parity::expect_gradients_near(on_device, on_cpu, tol, dtype);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeviceParity,
                         testing::Combine(testing::Values(DeviceType::xpu, DeviceType::cuda),
                                          testing::Values("llama_gqa", "llama3_rope_bias", "llama_linear_rope",
                                                          "llama_dynamic_rope", "llama_yarn_rope", "mistral_sliding",
                                                          "qwen2_tied_sharded", "qwen3_head_dim_sliding")),
                         [](const auto& info) {
                           return std::string(device_type_name(std::get<0>(info.param))) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
}  // namespace tfm

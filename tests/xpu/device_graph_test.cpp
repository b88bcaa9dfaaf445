// Device graphs on xpu, in both forms: command buffers (cl_khr_command_buffer, which PoCL offers) and
// recorded launches (the form of devices without the extension, tested by hiding PoCL's). A recorded sequence
// of kernels replays as direct launches run it, work a graph cannot hold gives no graph and runs nothing, and
// greedy decoding through graphs gives the tokens of decoding kernel by kernel. On the OpenCL test platform;
// skips when it has no device.
#include "tfm/backend/xpu/device_graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../model/parity_fixtures.h"
#include "test_platform.h"
#include "tfm/backend/xpu/xpu_backend.h"
#include "tfm/core/logging.h"
#include "tfm/model/batch.h"
#include "tfm/ops/ops.h"

namespace tfm::xpu {
namespace {

enum class GraphForm { command_buffer, launch_list };

class XpuGraphs : public OnTestDevice<testing::TestWithParam<GraphForm>> {
 protected:
  void SetUp() override {
    OnTestDevice::SetUp();
    if (IsSkipped()) return;
    XpuDevice& d = xpu_backend().device(0);
    if (GetParam() == GraphForm::command_buffer && !d.command_buffers)
      GTEST_SKIP() << "xpu:0 has no command buffers: " << d.no_command_buffers;
    if (GetParam() == GraphForm::launch_list) {
      hidden_ = std::exchange(d.command_buffers, std::nullopt);
      d.no_command_buffers = "hidden by the test";
    }
    previous_handler_ =
        logging::set_handler([this](logging::Level, const std::string& m) { log_.push_back(m); });
    previous_verbosity_ = logging::verbosity();
    logging::set_verbosity(logging::Level::debug);
    capturing_log_ = true;
  }
  void TearDown() override {
    if (hidden_) {
      XpuDevice& d = xpu_backend().device(0);
      d.command_buffers = std::exchange(hidden_, std::nullopt);
      d.no_command_buffers.clear();
    }
    if (!capturing_log_) return;
    logging::set_handler(previous_handler_);
    logging::set_verbosity(previous_verbosity_);
  }
  size_t logged(const std::string& part) const {
    return static_cast<size_t>(std::count_if(log_.begin(), log_.end(),
                                             [&](const std::string& m) { return m.find(part) != m.npos; }));
  }

  std::optional<CommandBufferApi>
      hidden_;  // the device's command buffers, while recorded launches are tested
  std::vector<std::string> log_;
  logging::Handler previous_handler_;
  logging::Level previous_verbosity_{};
  bool capturing_log_ = false;
};

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor filled(const Shape& shape, const std::vector<float>& values, Device device) {
  Tensor t = Tensor::cpu(shape, DType::float32);
  std::copy(values.begin(), values.end(), t.data<float>());
  return to_device(t, device);
}

std::vector<float> values_of(const Tensor& t) {
  const Tensor host = to_device(t, Device{});
  return {host.data<float>(), host.data<float>() + host.numel()};
}

// A decode-sized slice of a layer: out = silu_mul(linear(rms_norm(x))) copied on the device, plus residual.
// Every intermediate is allocated inside, as a model step's are, so a graph must keep them.
struct Block {
  static constexpr int64_t kRows = 5, kHidden = 48, kInter = 40;
  Tensor x, residual, norm, w, bias, out;

  Block(Device device, std::mt19937& rng)
      : x(filled({kRows, kHidden}, random_floats(kRows * kHidden, rng), device)),
        residual(filled({kRows, kInter}, random_floats(kRows * kInter, rng), device)),
        norm(filled({kHidden}, random_floats(kHidden, rng), device)),
        w(filled({2 * kInter, kHidden}, random_floats(2 * kInter * kHidden, rng), device)),
        bias(filled({2 * kInter}, random_floats(2 * kInter, rng), device)),
        out(empty({kRows, kInter}, DType::float32, device)) {}

  void run() {
    Tensor h = empty({kRows, kHidden}, DType::float32, x.device());
    ops::rms_norm(x, norm, 1e-6f, h);
    Tensor gate_up = empty({kRows, 2 * kInter}, DType::float32, x.device());
    ops::linear(h, w, bias, gate_up);
    Tensor act = empty({kRows, kInter}, DType::float32, x.device());
    ops::silu_mul(gate_up, act);
    copy(out, act);
    ops::add_(out, residual);
  }

  // The same block on the cpu, from this one's current values.
  std::vector<float> on_cpu() const {
    Block cpu = *this;
    for (Tensor* t : {&cpu.x, &cpu.residual, &cpu.norm, &cpu.w, &cpu.bias, &cpu.out})
      *t = to_device(*t, Device{});
    cpu.run();
    return values_of(cpu.out);
  }
};

// On any test platform, with the extension or without.
TEST(XpuGraphDecision, FollowsTheDevicesExtension) {
  if (!seam_test_device()) GTEST_SKIP() << "no OpenCL device on platform '" << test_platform() << "'";
  const XpuDevice& d = xpu_backend().device(0);
  EXPECT_EQ(d.command_buffers.has_value(), has_extension(d.id, "cl_khr_command_buffer"))
      << d.no_command_buffers;
  EXPECT_EQ(d.no_command_buffers.empty(), d.command_buffers.has_value());
}

TEST_P(XpuGraphs, ReplaysGiveWhatDirectLaunchesGiveOnNewInputs) {
  std::mt19937 rng(11);
  Block graphed(device_, rng), direct(device_, rng);
  int calls = 0;
  const std::unique_ptr<DeviceGraph> graph = find_backend(DeviceType::xpu)->capture(0, [&] {
    ++calls;
    graphed.run();
  });
  ASSERT_TRUE(graph);
  EXPECT_EQ(calls, 1);
  for (int round = 0; round < 3; ++round) {
    // New inputs into the graph's buffers; the direct block runs the same kernels on its own buffers between
    // replays, so a replay must use the argument values it recorded.
    const std::vector<float> x = random_floats(Block::kRows * Block::kHidden, rng);
    const std::vector<float> residual = random_floats(Block::kRows * Block::kInter, rng);
    copy_from_host(graphed.x, x.data());
    copy_from_host(graphed.residual, residual.data());
    copy_from_host(direct.x, x.data());
    copy_from_host(direct.residual, residual.data());
    copy(direct.norm, graphed.norm);
    copy(direct.w, graphed.w);
    copy(direct.bias, graphed.bias);
    graph->replay();
    direct.run();
    const std::vector<float> replayed = values_of(graphed.out);
    EXPECT_EQ(replayed, values_of(direct.out)) << "round " << round;
    EXPECT_LT(parity::relative_error(replayed.data(), graphed.on_cpu()), 1e-5) << "round " << round;
  }
  EXPECT_EQ(calls, 1);
}

TEST_P(XpuGraphs, ReplayingTwiceInARowRepeatsTheWork) {
  std::mt19937 rng(12);
  Tensor x = filled({1000}, random_floats(1000, rng), device_);
  Tensor y = filled({1000}, random_floats(1000, rng), device_);
  const std::vector<float> x0 = values_of(x), y0 = values_of(y);
  const std::unique_ptr<DeviceGraph> graph =
      find_backend(DeviceType::xpu)->capture(0, [&] { ops::add_(x, y); });
  ASSERT_TRUE(graph);
  EXPECT_EQ(values_of(x), x0);  // recorded, not run
  graph->replay();
  graph->replay();
  const std::vector<float> twice = values_of(x);
  for (size_t i = 0; i < x0.size(); ++i) EXPECT_EQ(twice[i], x0[i] + y0[i] + y0[i]) << i;
}

TEST_P(XpuGraphs, WorkAGraphCannotHoldGivesNoGraphAndRunsNothing) {
  Backend& backend = *find_backend(DeviceType::xpu);
  std::mt19937 rng(13);
  Tensor x = filled({64}, random_floats(64, rng), device_);
  Tensor y = filled({64}, random_floats(64, rng), device_);
  const std::vector<float> before = values_of(x);
  float host[64] = {};
  const std::vector<std::pair<std::string, std::function<void()>>> unrecordable = {
      {"a copy from the host", [&] { backend.copy_from_host(0, y.storage()->data(), host, sizeof host); }},
      {"a copy to the host", [&] { backend.copy_to_host(0, host, y.storage()->data(), sizeof host); }},
      {"a wait for the device", [&] { backend.synchronize(0); }},
  };
  for (const auto& [what, act] : unrecordable) {
    const std::unique_ptr<DeviceGraph> graph = backend.capture(0, [&] {
      ops::add_(x, y);
      act();
    });
    EXPECT_FALSE(graph) << what;
    EXPECT_EQ(logged("xpu:0: a device graph cannot hold " + what), 1u) << what;
  }
  EXPECT_EQ(values_of(x), before);  // the add recorded before each refusal never ran
  // The device records again afterwards.
  EXPECT_TRUE(backend.capture(0, [&] { ops::add_(x, y); }));
}

TEST_P(XpuGraphs, OneCaptureAtATimePerDevice) {
  Backend& backend = *find_backend(DeviceType::xpu);
  std::string error;
  const std::unique_ptr<DeviceGraph> outer = backend.capture(0, [&] {
    try {
      backend.capture(0, [] {});
    } catch (const Error& e) {
      error = e.what();
    }
  });
  EXPECT_TRUE(outer);
  EXPECT_EQ(error, "xpu:0: a device graph is already being captured");
}

// Three sequences that stop after different lengths, so decode steps run 3, 2 and 1 rows (graphs of 4, 2 and
// 1 rows) while their block tables grow: greedy tokens, step by step, with graphs and without, in both
// attention forms (the eager one through its scratch buffer), and Transformers' greedy continuations.
TEST_P(XpuGraphs, GreedyDecodingWithGraphsGivesTheTokensOfKernelByKernelSteps) {
  const std::string model_name = "llama_gqa";
  const std::vector<parity::Prompt> prompts = parity::reference(model_name);
  ASSERT_GE(prompts.size(), 3u);
  const std::vector<size_t> lengths = {6, 10, 14};
  auto decode = [&](const std::string& attention, bool graphs) {
    CausalLM m = CausalLM::from_pretrained(
        parity::kFixtures + model_name,
        {.dtype = "float32", .device = device_.str(), .attn_implementation = attention});
    m.set_device_graphs(graphs);
    KVCache cache = m.make_cache(64, 4);
    std::vector<SequenceCache> seqs(lengths.size());
    std::vector<std::vector<int64_t>> next(lengths.size()), tokens(lengths.size());
    for (size_t i = 0; i < lengths.size(); ++i) next[i] = prompts[i].ids;
    for (size_t step = 0; step < lengths.back(); ++step) {
      BatchBuilder builder(cache);
      std::vector<size_t> rows;
      for (size_t i = 0; i < lengths.size(); ++i) {
        if (tokens[i].size() == lengths[i]) continue;
        builder.add(seqs[i], next[i], Logits::last);
        rows.push_back(i);
      }
      const Tensor logits = to_device(m.forward(builder.finish(), cache), Device{});
      for (size_t r = 0; r < rows.size(); ++r) {
        const int64_t token = parity::argmax(logits.data<float>() + r * logits.size(1), logits.size(1));
        next[rows[r]] = {token};
        tokens[rows[r]].push_back(token);
      }
    }
    EXPECT_EQ(m.device_graphs(), graphs) << attention;  // a refused capture would have turned graphs off
    return tokens;
  };
  for (const std::string attention : {"sdpa", "eager"}) {
    log_.clear();
    const auto kernel_by_kernel = decode(attention, false);
    EXPECT_EQ(logged("captured the decode step"), 0u);
    const auto graphed = decode(attention, true);
    EXPECT_EQ(graphed, kernel_by_kernel) << attention;
    for (size_t i = 0; i < lengths.size(); ++i) {
      const std::vector<int64_t> transformers(prompts[i].generated.begin(),
                                              prompts[i].generated.begin() + lengths[i]);
      EXPECT_EQ(graphed[i], transformers) << attention << " sequence " << i;
    }
    for (const char* rows : {"4", "2", "1"}) {
      EXPECT_GE(logged("captured the decode step of " + std::string(rows) + " sequences"), 1u) << attention;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, XpuGraphs, testing::Values(GraphForm::command_buffer, GraphForm::launch_list),
                         [](const testing::TestParamInfo<GraphForm>& info) {
                           return info.param == GraphForm::command_buffer ? "CommandBuffer" : "LaunchList";
                         });

}  // namespace
}  // namespace tfm::xpu

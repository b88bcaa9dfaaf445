// Which linear kernel runs where: the Intel variants' rules on described devices (no OpenCL; their kernels
// need an Intel GPU, and the ocloc gate compiles them), and their refusal on the test platform's device.
#include "tfm/backend/xpu/intel_linear.h"

#include <gtest/gtest.h>

#include <string>

#include "test_platform.h"
#include "tfm/backend/kernel_registry.h"
#include "tfm/backend/xpu/xpu_backend.h"
#include "tfm/core/error.h"

namespace tfm::xpu {
namespace {

DeviceCapabilities intel_gpu(bool dpas, std::vector<size_t> sub_groups) {
  DeviceCapabilities c;
  c.intel_subgroups = true;
  c.sub_group_sizes = std::move(sub_groups);
  c.dpas = dpas;
  return c;
}
const DeviceCapabilities kTigerLake = intel_gpu(false, {8, 16, 32});
const DeviceCapabilities kArc = intel_gpu(true, {8, 16, 32});
const DeviceCapabilities kMax = intel_gpu(true, {16, 32});
const DeviceCapabilities kPortableOnly{};  // PoCL, NVIDIA

// x (M, K) and w (N, K) as views starting `offset` elements into their buffers; only shapes matter here.
struct LinearArgs {
  LinearArgs(int64_t M, int64_t K, int64_t N, DType d, int64_t offset = 0)
      : x(Tensor::cpu({M + 1, K}, d).reshape({(M + 1) * K}).narrow(offset, M * K).reshape({M, K})),
        w(Tensor::cpu({N + 1, K}, d).reshape({(N + 1) * K}).narrow(offset, N * K).reshape({N, K})),
        y(Tensor::cpu({M, N}, d)) {}
  op::Linear op() const { return {x, w, bias, y}; }
  Tensor x, w, bias;
  mutable Tensor y;  // op::Linear holds the output by non-const reference
};

std::optional<std::string> chosen(const LinearArgs& a, const DeviceCapabilities& device) {
  const auto launch = intel_linear_launch(LinearVariant::automatic, a.op(), device);
  if (!launch) return std::nullopt;
  return launch->kernel;
}

TEST(IntelLinear, DecodeRowsTakeTheSubGroupKernelWhereBlockReadsAreAligned) {
  for (DType d : {DType::float32, DType::bfloat16, DType::float16}) {
    EXPECT_EQ(chosen(LinearArgs(1, 4096, 4096, d), kTigerLake), "linear_subgroup_rows");
    EXPECT_EQ(chosen(LinearArgs(8, 264, 77, d), kArc), "linear_subgroup_rows");
    EXPECT_EQ(chosen(LinearArgs(8, 264, 77, d), kMax), "linear_subgroup_rows");
    EXPECT_EQ(chosen(LinearArgs(3, 67, 33, d), kArc), std::nullopt);     // rows not 16-byte aligned
    EXPECT_EQ(chosen(LinearArgs(3, 64, 33, d, 1), kArc), std::nullopt);  // w's offset not aligned
    EXPECT_EQ(chosen(LinearArgs(1, 4096, 4096, d), kPortableOnly), std::nullopt);
  }
  EXPECT_EQ(chosen(LinearArgs(9, 4096, 4096, DType::float32), kTigerLake), std::nullopt);  // prefill: tiled
}

TEST(IntelLinear, PrefillTakesDpasInBf16AndF16) {
  for (DType d : {DType::bfloat16, DType::float16}) {
    EXPECT_EQ(chosen(LinearArgs(9, 64, 33, d), kArc), "linear_dpas");
    EXPECT_EQ(chosen(LinearArgs(9, 64, 33, d), kTigerLake), std::nullopt);  // Xe-LP: no DPAS
    EXPECT_EQ(chosen(LinearArgs(9, 72, 33, d), kArc), std::nullopt);        // K not a multiple of 16
    EXPECT_EQ(chosen(LinearArgs(9, 64, 33, d, 4), kArc), std::nullopt);     // x at 8 bytes: not aligned
    EXPECT_EQ(chosen(LinearArgs(9, 64, 33, d, 8), kArc), "linear_dpas");    // 16 bytes
  }
  EXPECT_EQ(chosen(LinearArgs(64, 64, 64, DType::float32), kArc), std::nullopt);  // DPAS has no f32 here
}

TEST(IntelLinear, DpasTilesFollowTheDevicesSubGroupSize) {
  const LinearArgs a(37, 128, 97, DType::bfloat16);
  const auto arc = intel_linear_launch(LinearVariant::dpas, a.op(), kArc);
  ASSERT_TRUE(arc.has_value());
  EXPECT_NE(arc->program->options.find("-DSUB_GROUP=8"), std::string::npos) << arc->program->options;
  EXPECT_EQ(arc->items, (std::array<size_t, 2>{13 * 8, 5}));  // 97 columns in tiles of 8; 37 rows in 8s
  EXPECT_EQ(arc->group[0], 8u);
  const auto max = intel_linear_launch(LinearVariant::dpas, a.op(), kMax);
  ASSERT_TRUE(max.has_value());
  EXPECT_NE(max->program->options.find("-DSUB_GROUP=16"), std::string::npos) << max->program->options;
  EXPECT_EQ(max->items, (std::array<size_t, 2>{7 * 16, 5}));
  EXPECT_EQ(max->group[0], 16u);
}

TEST(IntelLinear, NamedVariantsRefuseWhatTheyCannotRun) {
  const LinearArgs a(16, 64, 64, DType::bfloat16);
  EXPECT_TRUE(intel_linear_supports(LinearVariant::dpas, a.op(), kArc));
  EXPECT_FALSE(intel_linear_supports(LinearVariant::dpas, a.op(), kTigerLake));
  EXPECT_FALSE(intel_linear_supports(LinearVariant::intel_subgroup, a.op(), kArc));  // 16 rows
  EXPECT_FALSE(intel_linear_launch(LinearVariant::portable, a.op(), kArc).has_value());
  try {
    intel_linear_launch(LinearVariant::dpas, a.op(), kPortableOnly);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the dpas kernel cannot run 16x64 by 64 in bfloat16"),
              std::string::npos)
        << e.what();
  }
}

TEST(IntelLinear, ProgramsOfEachDeviceClass) {
  EXPECT_TRUE(intel_linear_programs(DType::bfloat16, kPortableOnly).empty());
  EXPECT_EQ(intel_linear_programs(DType::bfloat16, kTigerLake).size(), 1u);
  EXPECT_EQ(intel_linear_programs(DType::bfloat16, kArc).size(), 2u);
  EXPECT_EQ(intel_linear_programs(DType::float32, kArc).size(), 1u);
}

TEST(IntelLinear, TheTestDeviceRefusesTheVariantsItLacks) {
  const std::optional<Device> device = seam_test_device();
  if (!device) GTEST_SKIP() << "no OpenCL device on platform '" << test_platform() << "'";
  const DeviceCapabilities& c = xpu_backend().device(device->index).capabilities;
  const Tensor x = empty({9, 64}, DType::bfloat16, *device), w = empty({32, 64}, DType::bfloat16, *device);
  Tensor y = empty({9, 32}, DType::bfloat16, *device);
  const op::Linear a{x, w, Tensor(), y};
  EXPECT_EQ(kernel_registry().supports(a, DeviceType::xpu, "dpas"), c.dpas);
  EXPECT_TRUE(kernel_registry().supports(a, DeviceType::xpu, "portable"));
}

}  // namespace
}  // namespace tfm::xpu

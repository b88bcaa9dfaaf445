// The forward pass on every device against Transformers, through the same parity fixtures and checks as the
// CPU (tests/model/parity_test.cpp), in float32 and in each 16-bit dtype the device computes in: GQA,
// head_dim != hidden / heads, QK-norm and sliding-window layers. xpu runs on the OpenCL test platform; cuda
// when a GPU is present; an absent device skips.
#include <gtest/gtest.h>

#include "../model/parity_fixtures.h"
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
  bool computes_in(DType dtype) const {
    return find_backend(std::get<0>(GetParam()))->supports_dtype(0, dtype);
  }
};

TEST_P(DeviceParity, LogitsAndGreedyTokensMatchTransformers) {
  parity::expect_logits_and_greedy_tokens(model(), device());
}

TEST_P(DeviceParity, RaggedBatchEqualsSeparateSequences) {
  parity::expect_ragged_batch(model(), device());
}

TEST_P(DeviceParity, BFloat16LogitsMatchTransformersInBFloat16) {
  if (!computes_in(DType::bfloat16)) GTEST_SKIP() << device() << " does not compute in bfloat16";
  parity::expect_dtype_parity(model(), device(), "bfloat16");
}

TEST_P(DeviceParity, Float16LogitsMatchTransformersInFloat16) {
  if (!computes_in(DType::float16)) GTEST_SKIP() << device() << " does not compute in float16";
  parity::expect_dtype_parity(model(), device(), "float16");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeviceParity,
                         testing::Combine(testing::Values(DeviceType::xpu, DeviceType::cuda),
                                          testing::Values("llama_gqa", "qwen3_head_dim_sliding")),
                         [](const auto& info) {
                           return std::string(device_type_name(std::get<0>(info.param))) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
}  // namespace tfm

// The forward pass on xpu against Transformers, through the same parity fixtures and checks as the CPU
// (tests/model/parity_test.cpp): GQA, head_dim != hidden / heads, QK-norm and sliding-window layers.
#include <gtest/gtest.h>

#include "../model/parity_fixtures.h"
#include "test_platform.h"

namespace tfm::xpu {
namespace {

class XpuParity : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!seam_test_device()) GTEST_SKIP() << "no OpenCL device on platform '" << test_platform() << "'";
  }
};

TEST_P(XpuParity, LogitsAndGreedyTokensMatchTransformers) {
  parity::expect_logits_and_greedy_tokens(GetParam(), "xpu:0");
}

TEST_P(XpuParity, RaggedBatchEqualsSeparateSequences) {
  parity::expect_ragged_batch(GetParam(), "xpu:0");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, XpuParity, testing::Values("llama_gqa", "qwen3_head_dim_sliding"));

}  // namespace
}  // namespace tfm::xpu

// The forward pass against Transformers: logits and greedy continuations recorded by
// tests/fixtures/make_fixtures.py for small random models of each architecture and feature.
#include <gtest/gtest.h>

#include "parity_fixtures.h"

namespace tfm {
namespace {

using namespace parity;

class Parity : public testing::TestWithParam<std::string> {};

TEST_P(Parity, LogitsAndGreedyTokensMatchTransformers) {
  expect_logits_and_greedy_tokens(GetParam(), "cpu");
}

TEST_P(Parity, RaggedBatchEqualsSeparateSequences) {
  if (GetParam() == "llama_dynamic_rope")
    GTEST_SKIP() << "dynamic RoPE depends on the longest sequence in a batch";
  expect_ragged_batch(GetParam(), "cpu");
}

TEST_P(Parity, BFloat16LogitsMatchTransformersInBFloat16) {
  expect_dtype_parity(GetParam(), "cpu", "bfloat16");
}

TEST_P(Parity, Float16LogitsMatchTransformersInFloat16) {
  expect_dtype_parity(GetParam(), "cpu", "float16");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Parity,
                         testing::Values("llama_gqa", "llama3_rope_bias", "llama_linear_rope",
                                         "llama_dynamic_rope", "llama_yarn_rope", "mistral_sliding",
                                         "qwen2_tied_sharded", "qwen3_head_dim_sliding"));

}  // namespace
}  // namespace tfm

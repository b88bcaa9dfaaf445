#include "tfm/generate/generation_config.h"

#include <gtest/gtest.h>

namespace tfm {
namespace {
TEST(GenerationConfig, Placeholder) {
  EXPECT_FALSE(GenerationConfig().max_length.has_value());
}
}  // namespace
}  // namespace tfm

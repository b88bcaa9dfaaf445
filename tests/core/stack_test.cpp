#include "tfm/core/stack.h"

#include <gtest/gtest.h>

namespace tfm {
namespace {

// Not inlined, so that each call is one more frame below the caller's.
[[gnu::noinline]] size_t left_below(int frames) {
  volatile char pad[1024] = {};
  return frames == 0 ? stack_space().left + pad[0] : left_below(frames - 1) + pad[0];
}

TEST(StackSpace, IsKnownAndShrinksWithDepth) {
  const StackSpace s = stack_space();
  ASSERT_GT(s.size, size_t{64} << 10);
  EXPECT_LT(s.left, s.size);
  EXPECT_LT(left_below(16), s.left - 16 * 1024);
  EXPECT_TRUE(stack_space_left());
}

}  // namespace
}  // namespace tfm

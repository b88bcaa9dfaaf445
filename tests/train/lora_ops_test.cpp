// The ops LoRA adds, on the CPU against float64: add_scaled_columns_ against its sum written out, dropout's
// mask (its rate, its scale, the same mask for the same seed, which is what makes it its own backward).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tfm/backend/backend.h"
#include "tfm/core/tensor.h"
#include "tfm/ops/ops.h"

namespace tfm {
namespace {

Tensor random_floats(const Shape& shape, std::mt19937& rng) {
  Tensor t = Tensor::cpu(shape, DType::float32);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

TEST(LoraOps, AddScaledColumnsAddsTheScaledBlockOnly) {
  std::mt19937 rng(1);
  const Tensor x = random_floats({3, 10}, rng);
  Tensor out = random_floats({3, 12}, rng);
  const Tensor before = clone(out);
  const op::ScaledColumns block{out, 4, x, 2, 5, 0.75f};
  ops::add_scaled_columns_({&block, 1}, true);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 12; ++c) {
      const double base = before.data<float>()[r * 12 + c];
      const double want = c >= 4 && c < 9 ? base + 0.75 * double{x.data<float>()[r * 10 + c - 2]} : base;
      EXPECT_NEAR(out.data<float>()[r * 12 + c], want, 1e-6) << r << ", " << c;
    }
  }
}

TEST(LoraOps, AddScaledColumnsWritesBlocksOverTheirColumnsAndLeavesTheRest) {
  std::mt19937 rng(3);
  const Tensor b0 = random_floats({2, 3}, rng), b1 = random_floats({3, 2}, rng);
  Tensor stacked = random_floats({5, 6}, rng);
  const Tensor before = clone(stacked);
  const op::ScaledColumns blocks[] = {{stacked.narrow(0, 2), 0, b0, 0, 3, 2.f},
                                      {stacked.narrow(2, 3), 3, b1, 0, 2, -0.5f}};
  ops::add_scaled_columns_(blocks, false);
  for (int64_t r = 0; r < 5; ++r) {
    for (int64_t c = 0; c < 6; ++c) {
      double want = before.data<float>()[r * 6 + c];
      if (r < 2 && c < 3) want = 2.0 * b0.data<float>()[r * 3 + c];
      if (r >= 2 && c >= 3 && c < 5) want = -0.5 * b1.data<float>()[(r - 2) * 2 + c - 3];
      EXPECT_NEAR(stacked.data<float>()[r * 6 + c], want, 1e-6) << r << ", " << c;
    }
  }
}

TEST(LoraOps, DropoutKeepsAtTheRateAndScalesWhatItKeeps) {
  std::mt19937 rng(2);
  const Tensor x = random_floats({100, 100}, rng);
  Tensor a = Tensor::cpu(x.shape(), DType::float32), b = Tensor::cpu(x.shape(), DType::float32),
         c = Tensor::cpu(x.shape(), DType::float32);
  ops::dropout(x, 0.25f, 7, a);
  ops::dropout(x, 0.25f, 7, b);
  ops::dropout(x, 0.25f, 8, c);
  int64_t kept = 0, same_as_other_seed = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = a.data<float>()[i];
    EXPECT_EQ(v, b.data<float>()[i]) << "the same seed must give the same mask";
    if (v != 0.f) {
      ++kept;
      EXPECT_NEAR(v, double{x.data<float>()[i]} / 0.75, 1e-6);
    }
    same_as_other_seed += (v != 0.f) == (c.data<float>()[i] != 0.f);
  }
  EXPECT_NEAR(static_cast<double>(kept) / x.numel(), 0.75, 0.02);
  EXPECT_LT(same_as_other_seed, x.numel() * 0.7) << "another seed must give another mask";
}

}  // namespace
}  // namespace tfm

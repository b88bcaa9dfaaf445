#include "tfm/generation/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tfm/core/error.h"

namespace tfm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Argmax, FirstIndexOnTiesAndNanWins) {
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-kInf, -kInf}), 0);
  EXPECT_EQ(argmax(std::vector<float>{1, NAN, 5}), 1);
  EXPECT_THROW(argmax(std::vector<float>{}), Error);
}

std::vector<int64_t> draws(Sampler s, const std::vector<float>& row, int n) {
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.sample(row));
  return out;
}

TEST(Sampler, ReproducibleForASeedAndIndependentPerStream) {
  const std::vector<float> row(50, 0.0f);
  EXPECT_EQ(draws(Sampler(42), row, 20), draws(Sampler(42), row, 20));
  EXPECT_NE(draws(Sampler(42), row, 20), draws(Sampler(43), row, 20));
  EXPECT_NE(draws(Sampler(42, 0), row, 20), draws(Sampler(42, 1), row, 20));
}

TEST(Sampler, FollowsTheSoftmaxAndNeverDrawsFilteredTokens) {
  const std::vector<float> row = {std::log(0.1f), -kInf, std::log(0.2f), std::log(0.7f), -kInf};
  Sampler s(7);
  std::vector<int> counts(row.size(), 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(s.sample(row))];
  EXPECT_EQ(counts[1], 0);
  EXPECT_EQ(counts[4], 0);
  // Binomial standard deviations are below 0.0033 here; allow five.
  EXPECT_NEAR(counts[0] / double(n), 0.1, 0.016);
  EXPECT_NEAR(counts[2] / double(n), 0.2, 0.016);
  EXPECT_NEAR(counts[3] / double(n), 0.7, 0.016);
}

TEST(Sampler, RejectsRowsWithoutAProbabilityDistribution) {
  Sampler s(1);
  EXPECT_THROW(s.sample(std::vector<float>{-kInf, -kInf}), Error);
  EXPECT_THROW(s.sample(std::vector<float>{0, NAN}), Error);
  EXPECT_THROW(s.sample(std::vector<float>{0, kInf}), Error);
  EXPECT_EQ(s.sample(std::vector<float>{-kInf, 3}), 1);
}

}  // namespace
}  // namespace tfm

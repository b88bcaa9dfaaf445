// op::SampleRows' CPU kernel (the reference every device's kernel is tested against in tests/kernels) against the
// host's logits processors, which follow Transformers': its draws follow the distribution those processors
// leave (a chi-square test against that softmax in float64), it draws what the host's Sampler draws from the
// processed row under the same keys, and it reports rows without a distribution.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "tfm/backend/sampling_math.h"
#include "tfm/generation/logits_process.h"
#include "tfm/generation/sampling.h"
#include "tfm/ops/ops.h"

namespace tfm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Settings {
  float temperature = 1;
  int32_t top_k = 0;
  float top_p = 1;
  float min_p = 0;
  float repetition_penalty = 1;
  std::vector<std::pair<int32_t, float>> penalized;  // (token, amount subtracted)
};

Settings settings(float temperature, int32_t top_k = 0, float top_p = 1, float min_p = 0,
                  float repetition_penalty = 1, std::vector<std::pair<int32_t, float>> penalized = {}) {
  return {temperature, top_k, top_p, min_p, repetition_penalty, std::move(penalized)};
}

// The op on the CPU: row r of `logits` (R, V) with settings[r] and key keys[r].
std::vector<int32_t> sample_rows(const std::vector<float>& logits, int64_t V, const std::vector<Settings>& settings,
                                 const std::vector<uint64_t>& keys) {
  const auto R = static_cast<int64_t>(settings.size());
  Tensor x = Tensor::cpu({R, V}, DType::float32);
  std::memcpy(x.data<float>(), logits.data(), logits.size() * sizeof(float));
  std::vector<int32_t> entries;
  std::vector<SampleSettings> rows;
  for (size_t r = 0; r < settings.size(); ++r) {
    const Settings& s = settings[r];
    const auto begin = static_cast<int32_t>(entries.size() / 2);
    for (const auto& [token, amount] : s.penalized) entries.insert(entries.end(), {token, std::bit_cast<int32_t>(amount)});
    rows.push_back({s.temperature, s.top_k, s.top_p, s.min_p, s.repetition_penalty, static_cast<uint32_t>(keys[r]),
                    static_cast<uint32_t>(keys[r] >> 32), begin, static_cast<int32_t>(entries.size() / 2)});
  }
  if (entries.empty()) entries = {-1, 0};
  Tensor settings_t = Tensor::cpu({R, kSampleSettingsWords}, DType::int32);
  std::memcpy(settings_t.data<int32_t>(), rows.data(), rows.size() * sizeof(SampleSettings));
  Tensor penalties = Tensor::cpu({static_cast<int64_t>(entries.size() / 2), 2}, DType::int32);
  std::memcpy(penalties.data<int32_t>(), entries.data(), entries.size() * sizeof(int32_t));
  Tensor ids = Tensor::cpu({R}, DType::int32);
  ops::sample_rows(x, settings_t, penalties, ids);
  return std::vector<int32_t>(ids.data<int32_t>(), ids.data<int32_t>() + R);
}

// The row as the host processes it: the subtracted amounts as ModelRunner subtracts them, then Transformers'
// processors in generate()'s order.
std::vector<float> processed(std::vector<float> row, const Settings& s) {
  std::vector<int64_t> input_ids;
  for (const auto& [token, amount] : s.penalized) {
    row[static_cast<size_t>(token)] -= amount;
    input_ids.push_back(token);
  }
  LogitsProcessorList list;
  if (s.repetition_penalty != 1) list.push_back(std::make_unique<RepetitionPenaltyLogitsProcessor>(s.repetition_penalty));
  if (s.temperature > 0) {  // the warpers, when sampling
    if (s.temperature != 1) list.push_back(std::make_unique<TemperatureLogitsWarper>(s.temperature));
    if (s.top_k > 0) list.push_back(std::make_unique<TopKLogitsWarper>(s.top_k));
    if (s.top_p < 1) list.push_back(std::make_unique<TopPLogitsWarper>(s.top_p));
    if (s.min_p > 0) list.push_back(std::make_unique<MinPLogitsWarper>(s.min_p));
  }
  list(input_ids, row);
  return row;
}

std::vector<double> softmax64(const std::vector<float>& scores) {
  double max = -kInf, sum = 0;
  for (float s : scores) max = std::max(max, double(s));
  std::vector<double> p(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) sum += p[i] = scores[i] == -kInf ? 0 : std::exp(double(scores[i]) - max);
  for (double& v : p) v /= sum;
  return p;
}

TEST(SampleRows, DrawsTheDistributionTheHostProcessorsLeave) {
  // Distinct values whose top-p cuts fall well inside a token's mass, so that rounding decides none.
  const std::vector<float> row = {2.0f, 1.3f, 0.4f, -0.5f, 1.9f, 0.0f, -1.2f, 0.9f, 1.6f, -2.5f};
  const int64_t V = static_cast<int64_t>(row.size());
  const std::vector<Settings> cases = {
      settings(1),
      settings(0.8f, 6),
      settings(1, 0, 0.8f),
      settings(1.3f, 0, 1, 0.15f),
      settings(0.9f, 0, 1, 0, 1.4f, {{0, 0.5f}, {3, 0.f}, {8, -0.3f}}),
      settings(0.7f, 7, 0.9f, 0.05f, 1.2f, {{4, 0.25f}}),
  };
  constexpr int kDraws = 40000;
  for (size_t c = 0; c < cases.size(); ++c) {
    const std::vector<double> p = softmax64(processed(row, cases[c]));
    std::vector<float> logits;
    std::vector<uint64_t> keys;
    for (int n = 0; n < kDraws; ++n) {
      logits.insert(logits.end(), row.begin(), row.end());
      keys.push_back(sampling_key(2026, c, static_cast<uint64_t>(n)));
    }
    const std::vector<int32_t> ids = sample_rows(logits, V, std::vector<Settings>(kDraws, cases[c]), keys);
    std::vector<int> counts(row.size(), 0);
    for (int32_t id : ids) {
      ASSERT_GE(id, 0);
      ++counts[static_cast<size_t>(id)];
    }
    double chi2 = 0;
    int kept = 0;
    for (size_t i = 0; i < row.size(); ++i) {
      if (p[i] == 0) {
        EXPECT_EQ(counts[i], 0) << "case " << c << " drew token " << i << ", which the processors removed";
        continue;
      }
      ++kept;
      const double expected = p[i] * kDraws;
      chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    }
    // At most 9 degrees of freedom: 50 is beyond the 1e-6 quantile.
    EXPECT_LT(chi2, 50) << "case " << c << ": " << kept << " tokens kept";
  }
}

TEST(SampleRows, DrawsWhatTheHostSamplerDrawsFromTheProcessedRow) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-4, 4);
  const int64_t V = 1000;
  const std::vector<Settings> cases = {
      settings(0),
      settings(0, 0, 1, 0, 1.5f, {{1, 0.f}, {2, 0.f}, {40, 0.f}}),
      settings(1),
      settings(0.6f, 20, 0.95f),
      settings(1.1f, 0, 0.7f, 0.01f, 1.2f, {{5, 1.f}, {600, -0.4f}, {999, 0.f}}),
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    Sampler host(99, c), device(99, c);
    for (int step = 0; step < 30; ++step) {
      std::vector<float> row(static_cast<size_t>(V));
      for (float& v : row) v = dist(rng);
      const std::vector<float> scores = processed(row, cases[c]);
      const bool greedy = cases[c].temperature <= 0;
      const int64_t want = greedy ? argmax(scores) : host.sample(scores);
      const uint64_t key = greedy ? 0 : device.next_key();
      EXPECT_EQ(sample_rows(row, V, {cases[c]}, {key})[0], want) << "case " << c << " step " << step;
    }
  }
}

TEST(SampleRows, ReportsRowsWithoutADistributionAndKeepsTheFirstOfTies) {
  const std::vector<float> rows = {
      1, NAN, 2, 0,         // NaN
      1, kInf, 2, 0,        // +inf
      -kInf, -kInf, -kInf, -kInf,  // nothing to draw
      -kInf, -kInf, 3, -kInf,      // one token left
      5, 1, 5, 2,           // greedy: the first of equal values
      5, 1, 5, 2,           // top-k of 1 keeps both tied values
      0, 1, 2, 3,           // the largest value times the temperature overflows
  };
  std::vector<Settings> each(7, settings(1));
  each[4].temperature = 0;
  each[5].top_k = 1;
  each[6].temperature = 1e-39f;
  const std::vector<int32_t> ids = sample_rows(rows, 4, each, std::vector<uint64_t>(7, 3));
  EXPECT_EQ(ids[0], -1);
  EXPECT_EQ(ids[1], -1);
  EXPECT_EQ(ids[2], -1);
  EXPECT_EQ(ids[3], 2);
  EXPECT_EQ(ids[4], 0);
  EXPECT_TRUE(ids[5] == 0 || ids[5] == 2) << ids[5];
  EXPECT_EQ(ids[6], -1);
}

}  // namespace
}  // namespace tfm

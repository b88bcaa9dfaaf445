#include "tfm/generation/sampling.h"

#include <cmath>

#include "tfm/core/error.h"

namespace tfm {

int64_t argmax(std::span<const float> scores) {
  check(!scores.empty(), "argmax of an empty logits row");
  size_t best = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (std::isnan(scores[i])) return static_cast<int64_t>(i);
    if (scores[i] > scores[best]) best = i;
  }
  return static_cast<int64_t>(best);
}

Sampler::Sampler(uint64_t seed, uint64_t stream) {
  // seed_seq's mixing is specified by the standard, so a seed gives the same draws on every platform.
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(stream), uint32_t(stream >> 32)};
  rng_.seed(seq);
}

int64_t Sampler::sample(std::span<const float> scores) {
  check(!scores.empty(), "sampling from an empty logits row");
  float max = -INFINITY;
  for (float s : scores) {
    check(!std::isnan(s) && s != INFINITY, "probability tensor contains either `inf`, `nan` or element < 0");
    max = std::max(max, s);
  }
  check(max != -INFINITY,
        "probability tensor contains either `inf`, `nan` or element < 0 (every token is -inf)");
  // Two passes over the row instead of a stored softmax: -inf (filtered) tokens cost nothing, which matters
  // after top-k on a vocabulary of 150k.
  auto weight = [&](size_t i) {
    return scores[i] == -INFINITY ? 0.0 : std::exp(double(scores[i]) - double(max));
  };
  double total = 0;
  for (size_t i = 0; i < scores.size(); ++i) total += weight(i);
  // A uniform double in [0, 1) from the top 53 bits, independent of the standard library's distributions.
  const double u = double(rng_() >> 11) * 0x1.0p-53;
  const double target = u * total;
  double cumulative = 0;
  size_t last_nonzero = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double w = weight(i);
    if (w == 0) continue;
    cumulative += w;
    last_nonzero = i;
    if (target < cumulative) return static_cast<int64_t>(i);
  }
  return static_cast<int64_t>(last_nonzero);  // rounding left target at the very top
}

}  // namespace tfm

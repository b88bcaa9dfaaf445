#include "tfm/generation/sampling.h"

#include <cmath>

#include "tfm/backend/sampling_math.h"
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

Sampler::Sampler(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}

uint64_t Sampler::next_key() {
  return sampling_key(seed_, stream_, step_++);
}

int64_t Sampler::sample(std::span<const float> scores) {
  check(!scores.empty(), "sampling from an empty logits row");
  bool any = false;
  for (float s : scores) {
    check(!std::isnan(s) && s != INFINITY, "probability tensor contains either `inf`, `nan` or element < 0");
    any = any || s != -INFINITY;
  }
  check(any, "probability tensor contains either `inf`, `nan` or element < 0 (every token is -inf)");
  return race_winner(scores.data(), static_cast<int64_t>(scores.size()), next_key(),
                     [&](int64_t i) { return scores[static_cast<size_t>(i)] != -INFINITY; });
}

}  // namespace tfm

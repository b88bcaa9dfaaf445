// Choosing the next token from a processed logits row: greedy search takes the argmax, sampling draws from
// the row's softmax with a seeded generator of its own, so a sequence's draws depend only on its seed and its
// rows.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace tfm {

// The index of the largest score, the first one on ties (as torch.argmax); a NaN counts as the largest.
int64_t argmax(std::span<const float> scores);

class Sampler {
 public:
  // `stream` separates the sequences of one call that share a seed (pass each sequence's index).
  explicit Sampler(uint64_t seed, uint64_t stream = 0);

  // Draws an index with probability softmax(scores)[i] (computed in float64). -inf scores are never drawn.
  // Throws tfm::Error, as torch.multinomial does, when the row holds NaN or +inf or only -inf.
  int64_t sample(std::span<const float> scores);

 private:
  std::mt19937_64 rng_;
};

}  // namespace tfm

// Choosing the next token from a processed logits row: greedy search takes the argmax, sampling draws from
// the row's softmax with counter-based random numbers keyed by (seed, stream, step), so a sequence's draws depend
// only on its seed, its stream and its rows, and a device that draws a step (op::SampleRows) draws what the host
// would.
#pragma once

#include <cstdint>
#include <span>

namespace tfm {

// The index of the largest score, the first one on ties (as torch.argmax); a NaN counts as the largest.
int64_t argmax(std::span<const float> scores);

class Sampler {
 public:
  // `stream` separates the sequences of one call that share a seed (pass each sequence's index).
  explicit Sampler(uint64_t seed, uint64_t stream = 0);

  // Draws an index with probability softmax(scores)[i]: the largest of scores[i] plus Gumbel noise, the noise
  // of this step's key (backend/sampling_math.h). -inf scores are never drawn. Throws tfm::Error, as
  // torch.multinomial does, when the row holds NaN or +inf or only -inf.
  int64_t sample(std::span<const float> scores);

  // The key of the next draw, which this takes: what a device that draws this step on its own is given.
  uint64_t next_key();

 private:
  uint64_t seed_, stream_, step_ = 0;
};

}  // namespace tfm

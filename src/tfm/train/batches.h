// The order a Trainer takes the examples in: a shuffle per epoch, then micro-batches of consecutive
// examples, each one ragged forward batch (the model takes sequences of different lengths together, so
// nothing is padded).
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/train/dataset.h"

namespace tfm {

// A permutation of 0 .. n-1, the same for the same (n, seed, epoch) everywhere. Precisely, with all
// arithmetic modulo 2^64 and splitmix64's output function
//     mix(z): z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
//             return z ^ (z >> 31)
// the generator starts at state = seed ^ mix(epoch) and each draw is state += 0x9E3779B97F4A7C15,
// mix(state). Fisher-Yates from the back: order = [0, 1, ..., n-1]; for i = n-1 down to 1:
// j = draw() % (i + 1), swap order[i] and order[j]. tests/fixtures/epoch_order.py is the same in Python.
// n < 0 is an error.
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch);

struct MicroBatch {
  std::vector<const TrainingExample*> examples;  // into the examples given to micro_batches
  int64_t num_tokens = 0;                        // of all its examples together: the forward batch's rows
};

// Consecutive groups of batch_size examples in `order` (indices into `examples`); the last group is short,
// or left out when drop_last (Transformers' dataloader_drop_last). Bad sizes and indices are errors.
std::vector<MicroBatch> micro_batches(const std::vector<TrainingExample>& examples,
                                      const std::vector<int64_t>& order, int64_t batch_size, bool drop_last);

}  // namespace tfm

#include "tfm/train/batches.h"

#include <numeric>
#include <utility>

#include "tfm/core/error.h"

namespace tfm {
namespace {

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch) {
  check(n >= 0, "cannot order ", n, " examples");
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  uint64_t state = seed ^ mix(static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    state += 0x9E3779B97F4A7C15ULL;
    const uint64_t j = mix(state) % static_cast<uint64_t>(i + 1);
    std::swap(order[i], order[j]);
  }
  return order;
}

std::vector<MicroBatch> micro_batches(const std::vector<TrainingExample>& examples,
                                      const std::vector<int64_t>& order, int64_t batch_size, bool drop_last) {
  check(batch_size > 0, "per_device_train_batch_size must be positive, got ", batch_size);
  const int64_t n = static_cast<int64_t>(order.size());
  std::vector<MicroBatch> batches;
  for (int64_t first = 0; first < n; first += batch_size) {
    const int64_t count = std::min(batch_size, n - first);
    if (count < batch_size && drop_last) break;
    MicroBatch& batch = batches.emplace_back();
    for (int64_t k = first; k < first + count; ++k) {
      const int64_t index = order[k];
      check(index >= 0 && index < static_cast<int64_t>(examples.size()), "example index ", index,
            " is outside the ", examples.size(), " examples");
      batch.examples.push_back(&examples[index]);
      batch.num_tokens += static_cast<int64_t>(examples[index].input_ids.size());
    }
  }
  return batches;
}

}  // namespace tfm

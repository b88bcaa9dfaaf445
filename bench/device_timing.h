// What the device benchmarks share: the median time of repeated calls of one piece of device work.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include "tfm/backend/backend.h"

namespace tfm::bench {

// Seconds of `run` (work queued on `device`), the device waited for around each call: the median of `repeat`
// calls after one warm-up call.
template <typename Run>
double median_seconds(Device device, int repeat, Run&& run) {
  Backend& backend = *find_backend(device.type);
  run();
  backend.synchronize(device.index_or_zero());
  std::vector<double> times;
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    backend.synchronize(device.index_or_zero());
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + repeat / 2, times.end());
  return times[static_cast<size_t>(repeat / 2)];
}

}  // namespace tfm::bench

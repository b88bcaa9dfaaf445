// What kernels that split one reduction over several blocks share (decode attention's splits of a row's keys,
// argmax over a vocabulary row): the device's size, which sets how many splits fill it, and the arrival counters
// with which the last block of a split learns that it is last and combines the others' partial results.
#pragma once

#include <cstdint>

namespace tfm::cuda {

// The current device's multiprocessors.
int multiprocessors();

// `count` zeroed counters on the current device, which every split kernel leaves zeroed (the last block of each
// split sets its counter back): one buffer per device, grown but never while a graph is being captured (the
// ordinary run before a capture has the same shapes); `kernel` names the caller in that error. Kernels of one
// stream use them one after another.
unsigned* arrival_counters(int64_t count, const char* kernel);

}  // namespace tfm::cuda

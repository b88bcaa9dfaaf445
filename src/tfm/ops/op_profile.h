// Where a step's device time goes, op by op: with TFM_PROFILE_OPS=1 (or ON, YES, TRUE) in the environment every op waits for its
// device before and after it runs, and the time of each (op, variant, tensors) is summed and printed to stderr
// when the program exits, largest first. Waiting serialises the device, so the totals are each op's own time;
// work outside ops (copies, zeroing) shows as the gap between their sum and the wall time. Device graphs are
// off while it is on: a replay runs a step's kernels where no op can time them, and a capture cannot hold the
// waits. Off, it costs a branch an op.
#pragma once

#include <functional>
#include <span>
#include <string_view>

#include "tfm/core/tensor.h"

namespace tfm::ops {

bool op_profile_enabled();

// Runs `run` (one op on `device`), timing it under a key made of `op`, `variant` and the tensors' shapes.
void profile_op(std::string_view op, std::string_view variant, std::span<const Tensor* const> tensors,
                Device device, const std::function<void()>& run);

}  // namespace tfm::ops

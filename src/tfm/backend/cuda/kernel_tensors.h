// What the CUDA kernels of the op set (kernels.cpp, training_kernels.cpp) do with tensors before a launch.
#pragma once

#include <cstdint>

#include "tfm/backend/backend.h"
#include "tfm/backend/cuda/runtime.h"

namespace tfm::cuda {

// Makes t's device current for the launches that follow.
inline void use_device_of(const Tensor& t) {
  use_device(t.device().index_or_zero());
}

// A launcher's device workspace of `bytes` on the device of `on`, or none when it needs none: it lives as
// long as the returned tensor, and workspace_pointer hands it to the launcher.
inline Tensor workspace_beside(const Tensor& on, int64_t bytes) {
  return bytes ? empty({bytes}, DType::uint8, on.device()) : Tensor();
}
inline void* workspace_pointer(const Tensor& workspace) {
  return workspace.defined() ? workspace.raw() : nullptr;
}

}  // namespace tfm::cuda

// The CUDA backend: device memory and copies (cuda_backend.cpp), the op set's kernels (kernels.cpp, over the
// launchers of the .cu files) and matmul through cuBLASLt, which is opened on the first matmul (linear.cpp).
#pragma once

#include "tfm/backend/backend.h"
#include "tfm/backend/kernel_registry.h"

namespace tfm {
Backend& cuda_backend();
}  // namespace tfm

namespace tfm::cuda {
// Every CUDA kernel; registering loads no library and touches no device.
void register_kernels(KernelRegistry& registry);
void register_linear_kernels(KernelRegistry& registry);
void register_training_kernels(KernelRegistry& registry);
}  // namespace tfm::cuda

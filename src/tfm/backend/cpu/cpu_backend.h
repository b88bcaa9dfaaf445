// The CPU backend: host memory, and kernels in plain C++ with OpenMP (kernels.cpp), matmul through oneDNN
// (linear.cpp).
#pragma once

#include "tfm/backend/backend.h"
#include "tfm/backend/kernel_registry.h"
#include "tfm/backend/op_set.h"

namespace tfm {
Backend& cpu_backend();
}  // namespace tfm

namespace tfm::cpu {
void register_pointwise_kernels(KernelRegistry& registry);
void register_linear_kernels(KernelRegistry& registry);
void register_training_kernels(KernelRegistry& registry);
void register_sampling_kernels(KernelRegistry& registry);
}  // namespace tfm::cpu

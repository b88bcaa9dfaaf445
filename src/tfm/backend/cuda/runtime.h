// CUDA runtime statuses as tfm::Error, for the backend's host code.
#pragma once

#include <cuda_runtime_api.h>

#include "tfm/core/error.h"

namespace tfm::cuda {

inline void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // reported here, so not again by the next launch's check
  throw_error("CUDA error in ", what, ": ", cudaGetErrorString(status));
}

// Makes device `index` current for this thread's next calls and launches.
inline void use_device(int index) {
  check_cuda(cudaSetDevice(index), "cudaSetDevice");
}

}  // namespace tfm::cuda

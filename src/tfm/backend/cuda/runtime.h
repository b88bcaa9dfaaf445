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

// The one stream each device's work goes to: kernels, cuBLASLt and copies. One stream orders every kernel after
// those before it, so memory freed by one can be reused by the next at once; and unlike the legacy default
// stream it can be captured into a graph. Created on the device's first use.
cudaStream_t stream(int index);
// The stream of the current device.
cudaStream_t current_stream();

// Whether kernels on device `index` may be chained by programmatic dependent launch (device_common.cuh's
// launch_chained): compute capability 9.0 or later, unless TFM_CUDA_PDL=0 (for measuring what chaining gains).
// Decided for every device on the first call, not on each launch.
bool chaining_supported(int index);

}  // namespace tfm::cuda

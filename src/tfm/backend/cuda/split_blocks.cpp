#include "tfm/backend/cuda/split_blocks.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "tfm/backend/cuda/runtime.h"
#include "tfm/core/error.h"

namespace tfm::cuda {

int multiprocessors() {
  int device = 0, count = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  return count;
}

unsigned* arrival_counters(int64_t count, const char* kernel) {
  static std::mutex mutex;
  static std::map<int, std::pair<unsigned*, int64_t>> buffers;
  std::lock_guard<std::mutex> lock(mutex);
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  auto& [counters, size] = buffers[device];
  if (size >= count) return counters;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(current_stream(), &capturing), "cudaStreamIsCapturing");
  if (capturing != cudaStreamCaptureStatusNone)
    throw_error("CUDA kernel ", kernel, ": a graph is being captured with more rows than its warm-up had");
  check_cuda(cudaStreamSynchronize(current_stream()), "cudaStreamSynchronize");
  if (counters) check_cuda(cudaFree(counters), "cudaFree");
  size = std::max<int64_t>(count, 4096);
  void* memory = nullptr;
  check_cuda(cudaMalloc(&memory, static_cast<size_t>(size) * sizeof(unsigned)), "cudaMalloc");
  counters = static_cast<unsigned*>(memory);
  check_cuda(cudaMemsetAsync(counters, 0, static_cast<size_t>(size) * sizeof(unsigned), current_stream()),
             "cudaMemsetAsync");
  return counters;
}

}  // namespace tfm::cuda

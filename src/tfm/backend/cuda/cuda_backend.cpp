// The CUDA backend: device memory through the runtime API, every call's status checked.
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "tfm/backend/cuda/cuda_backend.h"
#include "tfm/core/error.h"

namespace tfm {
namespace {

void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw_error("CUDA error in ", what, ": ", cudaGetErrorString(status));
}

class CudaBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::cuda; }

  int device_count() override {
    int n = 0;
    // No driver or no GPU is not an error: the kind is simply absent.
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }

  DeviceInfo info(int index) override {
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    use(index);
    size_t free_bytes = 0, total_bytes = 0;
    cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    int driver = 0;
    cuda_check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
    DeviceInfo d;
    d.device = Device{DeviceType::cuda, index};
    d.compute_capability = prop.major * 10 + prop.minor;
    d.name = prop.name;
    d.total_memory = total_bytes;
    d.free_memory = free_bytes;
    d.driver_version = "CUDA " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10) +
                       ", compute capability " + std::to_string(prop.major) + "." +
                       std::to_string(prop.minor);
    return d;
  }

  // Freed memory is kept for reuse by size: a forward step allocates the same buffers every step, and
  // cudaMalloc/cudaFree (which synchronizes the device) would otherwise dominate a decode step. Every kernel
  // runs on the device's one default stream, so memory reused by a later kernel is ordered after earlier
  // users.
  void* allocate(int index, size_t bytes) override {
    use(index);
    const size_t size = rounded(bytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& cached = free_[index];
      if (auto it = cached.find(size); it != cached.end()) {
        void* p = it->second;
        cached.erase(it);
        return p;
      }
    }
    void* p = nullptr;
    cudaError_t status = cudaMalloc(&p, size);
    if (status == cudaErrorMemoryAllocation) {  // give the cached blocks back and try once more
      cudaGetLastError();
      release_cached(index);
      status = cudaMalloc(&p, size);
    }
    if (status != cudaSuccess) {
      cudaGetLastError();
      throw_error("cuda:", index, ": cannot allocate ", bytes, " bytes: ", cudaGetErrorString(status));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    sizes_[p] = size;
    return p;
  }

  void deallocate(int index, void* p) override {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[index].emplace(sizes_.at(p), p);
  }

  void copy_from_host(int index, DeviceSpan dst, const void* src, size_t bytes) override {
    use(index);
    cuda_check(cudaMemcpy(address(dst), src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
  }
  void copy_to_host(int index, void* dst, DeviceSpan src, size_t bytes) override {
    use(index);
    cuda_check(cudaMemcpy(dst, address(src), bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
  }
  void copy_on_device(int index, DeviceSpan dst, DeviceSpan src, size_t bytes) override {
    use(index);
    cuda_check(cudaMemcpy(address(dst), address(src), bytes, cudaMemcpyDeviceToDevice),
               "cudaMemcpy device to device");
  }
  void synchronize(int index) override {
    use(index);
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  OpKernels* kernels() override { return &cuda_op_kernels(); }

 private:
  // Sizes round up to 512 bytes, and to 2 MiB past 1 MiB, so that near sizes share blocks.
  static size_t rounded(size_t bytes) {
    const size_t unit = bytes > (size_t{1} << 20) ? (size_t{2} << 20) : 512;
    return std::max<size_t>(1, (bytes + unit - 1) / unit) * unit;
  }
  void release_cached(int index) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [size, p] : free_[index]) {
      cudaFree(p);
      sizes_.erase(p);
    }
    free_[index].clear();
  }

  std::mutex mutex_;
  std::map<int, std::multimap<size_t, void*>> free_;  // per device: cached blocks by size
  std::unordered_map<void*, size_t> sizes_;           // every block tfm holds, by address
  static char* address(DeviceSpan s) { return static_cast<char*>(s.base) + s.offset; }
  static void use(int index) { cuda_check(cudaSetDevice(index), "cudaSetDevice"); }
};

}  // namespace

Backend& cuda_backend() {
  static CudaBackend backend;
  return backend;
}

}  // namespace tfm

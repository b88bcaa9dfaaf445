// The CUDA backend: device memory through the runtime API, every call's status checked.
#include <cuda_runtime.h>

#include <string>

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

  void* allocate(int index, size_t bytes) override {
    use(index);
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
    if (status != cudaSuccess) {
      cudaGetLastError();
      throw_error("cuda:", index, ": cannot allocate ", bytes, " bytes: ", cudaGetErrorString(status));
    }
    return p;
  }

  void deallocate(int index, void* p) override {
    use(index);
    cudaFree(p);  // a failure here cannot be reported from a destructor; the next call will see it
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
  static char* address(DeviceSpan s) { return static_cast<char*>(s.base) + s.offset; }
  static void use(int index) { cuda_check(cudaSetDevice(index), "cudaSetDevice"); }
};

}  // namespace

Backend& cuda_backend() {
  static CudaBackend backend;
  return backend;
}

}  // namespace tfm

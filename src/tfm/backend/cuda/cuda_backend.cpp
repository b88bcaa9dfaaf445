// The CUDA backend: device memory, copies and graphs through the runtime API (statically linked; it opens the
// driver itself when a device is first used), every call's status checked.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/backend/block_cache.h"
#include "tfm/backend/cuda/cuda_backend.h"
#include "tfm/backend/cuda/runtime.h"
#include "tfm/core/error.h"

namespace tfm {
namespace {

using cuda::check_cuda;
using cuda::use_device;

// Host-to-device copies of this size or more go through tfm's pinned staging buffers.
constexpr size_t kStagedCopyFrom = size_t{1} << 20;
// Each of the two staging buffers. The weight loader copies 64 MB (bf16) or 128 MB (float32) at a time, and
// only the pieces of one call overlap, so a piece is an eighth of the smaller: the first piece's fill, the
// one step not overlapped, stays short, and a piece still takes the link ~150 us, against ~10 us to issue and
// wait.
constexpr size_t kStagingBytes = size_t{8} << 20;

// Pinned host memory for copies to the host that return before the device has run them (a copy into pageable
// memory waits for the device first), kept for reuse: a step's ids need one buffer of a few KB per step.
class PinnedBuffers {
 public:
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  Buffer take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto fits = std::find_if(free_.begin(), free_.end(), [&](const Buffer& b) { return b.bytes >= bytes; });
      if (fits != free_.end()) {
        const Buffer b = *fits;
        free_.erase(fits);
        return b;
      }
    }
    Buffer b{nullptr, std::max<size_t>(std::bit_ceil(bytes), 4096)};
    check_cuda(cudaHostAlloc(&b.data, b.bytes, cudaHostAllocPortable), "cudaHostAlloc");
    return b;
  }
  void give_back(Buffer b) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(b);
  }

 private:
  std::mutex mutex_;
  std::vector<Buffer> free_;
};

// A device-to-host copy into a pinned buffer, an event behind it; waiting copies the bytes on to their
// destination.
class CudaPendingCopy final : public PendingCopy {
 public:
  CudaPendingCopy(PinnedBuffers& buffers, int index, void* dst, const void* src, size_t bytes)
      : buffers_(buffers), index_(index), dst_(dst), bytes_(bytes) {
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
    try {
      buffer_ = buffers_.take(bytes);
      const cudaStream_t s = cuda::stream(index);
      check_cuda(cudaMemcpyAsync(buffer_.data, src, bytes, cudaMemcpyDeviceToHost, s),
                 "cudaMemcpyAsync device to host");
      check_cuda(cudaEventRecord(done_, s), "cudaEventRecord");
    } catch (...) {
      cudaStreamSynchronize(cuda::stream(index));  // a copy queued before the failure writes the buffer
      release();
      throw;
    }
  }
  ~CudaPendingCopy() override {
    if (!waited_) cudaEventSynchronize(done_);
    release();
  }
  void wait() override {
    if (waited_) return;
    use_device(index_);
    check_cuda(cudaEventSynchronize(done_), "cudaEventSynchronize after a device-to-host copy");
    std::memcpy(dst_, buffer_.data, bytes_);
    waited_ = true;
  }

 private:
  void release() {
    if (buffer_.data) buffers_.give_back(buffer_);
    cudaEventDestroy(done_);
  }

  PinnedBuffers& buffers_;
  int index_;
  void* dst_;
  size_t bytes_;
  PinnedBuffers::Buffer buffer_;
  cudaEvent_t done_ = nullptr;
  bool waited_ = false;
};

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
    check_cuda(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    use_device(index);
    size_t free_bytes = 0, total_bytes = 0;
    check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    int driver = 0;
    check_cuda(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
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
    use_device(index);
    void* p = blocks_.allocate(index, bytes);
    if (!p) throw_error("cuda:", index, ": cannot allocate ", bytes, " bytes: out of memory");
    return p;
  }
  void deallocate(int index, void* p) override { blocks_.deallocate(index, p); }
  size_t memory_allocated(int index) override { return blocks_.allocated(index); }

  // Host-to-device copies return once the bytes are read: small ones are staged by the driver (which copies
  // pageable memory before cudaMemcpyAsync returns), large ones go through tfm's pinned buffers.
  void copy_from_host(int index, DeviceSpan dst, const void* src, size_t bytes) override {
    use_device(index);
    if (bytes < kStagedCopyFrom) {
      check_cuda(cudaMemcpyAsync(address(dst), src, bytes, cudaMemcpyHostToDevice, cuda::stream(index)),
                 "cudaMemcpyAsync host to device");
    } else {
      copy_from_reader(index, dst, bytes, [src](void* out, size_t offset, size_t n) {
        std::memcpy(out, static_cast<const char*>(src) + offset, n);
      });
    }
  }
  void copy_to_host(int index, void* dst, DeviceSpan src, size_t bytes) override {
    use_device(index);
    const cudaStream_t s = cuda::stream(index);
    check_cuda(cudaMemcpyAsync(dst, address(src), bytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync device to host");
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize after a device-to-host copy");
  }
  std::unique_ptr<PendingCopy> copy_to_host_queued(int index, void* dst, DeviceSpan src, size_t bytes) override {
    use_device(index);
    return std::make_unique<CudaPendingCopy>(pinned_, index, dst, address(src), bytes);
  }
  void copy_on_device(int index, DeviceSpan dst, DeviceSpan src, size_t bytes) override {
    use_device(index);
    check_cuda(cudaMemcpyAsync(address(dst), address(src), bytes, cudaMemcpyDeviceToDevice, cuda::stream(index)),
               "cudaMemcpyAsync device to device");
  }
  void fill_zero(int index, DeviceSpan dst, size_t bytes) override {
    use_device(index);
    check_cuda(cudaMemsetAsync(address(dst), 0, bytes, cuda::stream(index)), "cudaMemsetAsync");
  }
  void synchronize(int index) override {
    use_device(index);
    check_cuda(cudaStreamSynchronize(cuda::stream(index)), "cudaStreamSynchronize");
  }

  std::unique_ptr<DeviceGraph> capture(int index, const std::function<void()>& work) override;

  // bfloat16 matmuls need cuBLASLt's bf16 kernels (Ampere, 8.0); float16 arithmetic needs 5.3.
  bool supports_dtype(int index, DType dtype) override {
    switch (dtype) {
      case DType::float32:
        return true;
      case DType::bfloat16:
        return compute_capability(index) >= 80;
      case DType::float16:
        return compute_capability(index) >= 53;
      default:
        return false;
    }
  }

  std::string attention_unavailable(int index, std::string_view name) override {
    if (name != "flash_attention_3") return "";
    const int capability = compute_capability(index);
    if (capability >= 90) return "";
    const std::string major = std::to_string(capability / 10), minor = std::to_string(capability % 10);
    return "Flash Attention 3 requires compute capability >= 9.0, but found (" + major + ", " + minor +
           ") with compute capability " + major + ".0.";
  }

 private:
  static int compute_capability(int index) {
    int major = 0, minor = 0;
    check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index),
               "cudaDeviceGetAttribute");
    check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index),
               "cudaDeviceGetAttribute");
    return major * 10 + minor;
  }

  // The driver copies pageable memory through small pinned buffers of its own, at ~10 GB/s; model loading
  // moves tens of GB out of files. So large copies go through two pinned buffers of tfm's, allocated on the
  // first one: while one piece's transfer runs on the device's copy stream, the host's threads read the next
  // piece into the other buffer. The copy stream starts after the work queued on the device's stream; the call
  // returns when every byte is on the device.
  void copy_from_reader(int index, DeviceSpan dst_span, size_t bytes, const HostReader& read) override {
    use_device(index);
    char* dst = address(dst_span);
    std::lock_guard<std::mutex> lock(staging_mutex_);
    for (void*& buffer : staging_) {
      if (!buffer) check_cuda(cudaHostAlloc(&buffer, kStagingBytes, cudaHostAllocPortable), "cudaHostAlloc");
    }
    cudaStream_t& stream = copy_streams_[index];
    if (!stream) check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaEvent_t& computed = compute_done_[index];
    if (!computed) check_cuda(cudaEventCreateWithFlags(&computed, cudaEventDisableTiming), "cudaEventCreate");
    // The destination may be memory that kernels still queued on the device's stream were using.
    check_cuda(cudaEventRecord(computed, cuda::stream(index)), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream, computed, 0), "cudaStreamWaitEvent");
    const size_t pieces = (bytes + kStagingBytes - 1) / kStagingBytes;
    auto piece_bytes = [&](size_t i) { return std::min(kStagingBytes, bytes - i * kStagingBytes); };
    read_in_parallel(read, staging_[0], 0, piece_bytes(0));
    for (size_t i = 0; i < pieces; ++i) {
      check_cuda(cudaMemcpyAsync(dst + i * kStagingBytes, staging_[i % 2], piece_bytes(i),
                                 cudaMemcpyHostToDevice, stream),
                 "cudaMemcpyAsync host to device");
      try {
        if (i + 1 < pieces) read_in_parallel(read, staging_[(i + 1) % 2], (i + 1) * kStagingBytes, piece_bytes(i + 1));
      } catch (...) {
        cudaStreamSynchronize(stream);  // the transfer in flight reads a staging buffer
        throw;
      }
      check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize after a host-to-device copy");
    }
  }

  static char* address(DeviceSpan s) { return static_cast<char*>(s.base) + s.offset; }

  // cudaMalloc and cudaFree (which synchronizes the device) kept out of steps; cudaFree is not called while a
  // graph is captured (the cache keeps its blocks then).
  BlockCache blocks_{[](int index, size_t size) -> void* {
                       use_device(index);
                       void* p = nullptr;
                       const cudaError_t status = cudaMalloc(&p, size);
                       if (status == cudaErrorMemoryAllocation) {
                         cudaGetLastError();
                         return nullptr;
                       }
                       check_cuda(status, "cudaMalloc");
                       return p;
                     },
                     [](int index, void* p) {
                       use_device(index);
                       cudaFree(p);
                     }};

  std::mutex staging_mutex_;
  void* staging_[2] = {};
  PinnedBuffers pinned_;
  std::map<int, cudaStream_t> copy_streams_;  // per device
  std::map<int, cudaEvent_t> compute_done_;   // per device: where its stream's work had got to
};

class CudaGraph final : public DeviceGraph {
 public:
  CudaGraph(int index, cudaGraphExec_t exec) : index_(index), exec_(exec) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  void replay() override {
    use_device(index_);
    check_cuda(cudaGraphLaunch(exec_, cuda::stream(index_)), "cudaGraphLaunch");
  }

 private:
  int index_;
  cudaGraphExec_t exec_;
};

// Relaxed capture: the allocator may still cudaMalloc for the graph pool while the stream is captured.
std::unique_ptr<DeviceGraph> CudaBackend::capture(int index, const std::function<void()>& work) {
  use_device(index);
  const cudaStream_t s = cuda::stream(index);
  check(blocks_.set_capturing(index, true), "cuda:", index, ": a graph is already being captured");
  auto stop_capturing = [&] { blocks_.set_capturing(index, false); };
  cudaGraph_t graph = nullptr;
  try {
    check_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
    try {
      work();
    } catch (...) {
      cudaStreamEndCapture(s, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    check_cuda(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
  } catch (...) {
    stop_capturing();
    throw;
  }
  stop_capturing();
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check_cuda(status, "cudaGraphInstantiate");
  return std::make_unique<CudaGraph>(index, exec);
}

}  // namespace

Backend& cuda_backend() {
  static CudaBackend backend;
  return backend;
}

namespace cuda {

cudaStream_t stream(int index) {
  static std::mutex mutex;
  static std::map<int, cudaStream_t> streams;
  std::lock_guard<std::mutex> lock(mutex);
  cudaStream_t& s = streams[index];
  if (!s) {
    use_device(index);
    check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  return s;
}

cudaStream_t current_stream() {
  int index = 0;
  check_cuda(cudaGetDevice(&index), "cudaGetDevice");
  return stream(index);
}

bool chaining_supported(int index) {
  static const std::vector<bool> supported = [] {
    std::vector<bool> by_device;
    const char* value = std::getenv("TFM_CUDA_PDL");
    if (value && std::string_view(value) == "0") return by_device;
    int count = 0;
    check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    for (int i = 0; i < count; ++i) {
      int major = 0;
      check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i), "cudaDeviceGetAttribute");
      by_device.push_back(major >= 9);
    }
    return by_device;
  }();
  return index >= 0 && static_cast<size_t>(index) < supported.size() && supported[static_cast<size_t>(index)];
}

}  // namespace cuda

}  // namespace tfm

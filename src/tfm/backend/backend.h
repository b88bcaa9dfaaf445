// The device seam. Each device kind (cpu, cuda, xpu) implements Backend for its memory and devices and registers
// its kernels in the kernel registry (kernel_registry.h); everything above this header sees devices only
// through it and through ops/. A backend that is not compiled in, or finds no device, reports zero devices; it
// never fails at load time, and loads its device libraries only when a device of its kind is first used.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/backend/xpu/device_capabilities.h"
#include "tfm/core/device.h"
#include "tfm/core/tensor.h"

namespace tfm {

struct DeviceInfo {
  Device device;
  std::string name;            // "NVIDIA H200", "Intel(R) Data Center GPU Max 1550", the CPU model
  size_t total_memory = 0;     // bytes
  size_t free_memory = 0;      // bytes
  std::string driver_version;  // as the backend's runtime reports it
  int compute_capability = 0;  // CUDA devices: major * 10 + minor
  std::optional<xpu::DeviceCapabilities> xpu_capabilities;  // xpu devices
};

// Device memory as an allocation and a byte offset into it: OpenCL buffers cannot be offset like pointers.
struct DeviceSpan {
  DeviceSpan(void* base, size_t offset = 0)
      : base(base), offset(offset) {}  // NOLINT: a whole allocation converts
  void* base;
  size_t offset;
};

// A source of host bytes read a piece at a time: read(dst, offset, bytes) puts bytes [offset, offset + bytes)
// of the source at dst. Pieces start at multiples of 64 bytes, and several threads may read pieces at once.
using HostReader = std::function<void(void* dst, size_t offset, size_t bytes)>;

// Reads `bytes` of `read` from `offset` into `dst` on every thread of the team, in pieces; the first exception
// a piece throws is rethrown here.
void read_in_parallel(const HostReader& read, void* dst, size_t offset, size_t bytes);

// Device work recorded once and replayed: the same kernels on the same addresses, without the host issuing
// them one by one.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  virtual void replay() = 0;
};

// A copy to the host queued behind the device's work (Backend::copy_to_host_queued), waited for when its bytes
// are needed: asynchronous batching reads a step's ids while the device runs the next step.
class PendingCopy {
 public:
  // Waits for a copy not waited for: its bytes may still be landing in memory the caller is about to free.
  virtual ~PendingCopy() = default;
  // Returns once the bytes are at the destination; again at once.
  virtual void wait() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType type() const = 0;
  // Devices this backend can use now (after ZE_AFFINITY_MASK, CUDA_VISIBLE_DEVICES, ...); 0 when absent.
  virtual int device_count() = 0;
  // Why device_count() is 0, for the error of a request for a device ("no OpenCL platform is installed ...");
  // empty when there are devices or the backend cannot tell.
  virtual std::string why_no_devices();
  virtual DeviceInfo info(int index) = 0;
  virtual void* allocate(int index, size_t bytes) = 0;  // throws tfm::Error when out of memory
  virtual void deallocate(int index, void* p) = 0;
  // Copies bytes: host→device, device→host, or within one device. Blocking with respect to the host.
  virtual void copy_from_host(int index, DeviceSpan dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(int index, void* dst, DeviceSpan src, size_t bytes) = 0;
  // Copies `bytes` that `read` produces to the device, as copy_from_host copies memory. A backend reads them
  // straight into its transfer buffers (pinned memory on cuda), so that a file's bytes or a dtype conversion
  // need no buffer of their own. By default: host buffers of 16 MB, then copy_from_host.
  virtual void copy_from_reader(int index, DeviceSpan dst, size_t bytes, const HostReader& read);
  // Queues a copy to the host behind the work queued on the device so far and returns before it is done where
  // the device can; `dst` must stay valid until the copy is waited for or destroyed. By default: copy_to_host,
  // done before returning.
  virtual std::unique_ptr<PendingCopy> copy_to_host_queued(int index, void* dst, DeviceSpan src, size_t bytes);
  virtual void copy_on_device(int index, DeviceSpan dst, DeviceSpan src, size_t bytes) = 0;
  // Sets `bytes` bytes to zero, in order with the device's other work. By default: copies of a zeroed host
  // buffer of at most 16 MB.
  virtual void fill_zero(int index, DeviceSpan dst, size_t bytes);
  virtual void synchronize(int index) = 0;
  // Bytes of tensors held on the device now, as torch.cuda.memory_allocated counts them (memory a caching
  // allocator keeps for reuse is not counted).
  virtual size_t memory_allocated(int index) = 0;

  // Records the device work `work` issues on device `index` (kernels only: no copy to or from the host, no
  // synchronisation) into a graph, without running it; nullptr when the device has no graphs, and then `work`
  // has not been called, or (xpu) when `work` did what a graph cannot hold, and then none of it ran. Memory
  // allocated inside `work` is kept for graphs, so a replay finds it again; what `work` uses from outside must
  // outlive the graph.
  virtual std::unique_ptr<DeviceGraph> capture(int index, const std::function<void()>& work);

  // Whether the device computes in `dtype` (float32, bfloat16, float16) as well as holding it.
  virtual bool supports_dtype(int index, DType dtype) = 0;
  // Why the device cannot run Transformers' attn_implementation `name`, in Transformers' words, or empty when it
  // can. Only flash_attention_3 depends on the device (CUDA with compute capability 9.0).
  virtual std::string attention_unavailable(int index, std::string_view name);
};

// The backend of a device kind, or nullptr when tfm was built without it.
Backend* find_backend(DeviceType type);

// Every device tfm can use, cpu first.
std::vector<DeviceInfo> list_devices();

// Resolves a user's device string: "auto" picks the first available of cuda, xpu, cpu (as Transformers'
// pipeline does); "cuda" means "cuda:0". A device that is absent is an error listing those present.
Device resolve_device(std::string_view spec);

// Whether `device` computes in bfloat16, what Trainer asks torch.cuda / torch.xpu.is_bf16_supported() before
// training in bf16; false for a device that is absent or whose backend tfm was built without.
bool is_bf16_supported(Device device);

// A tensor of uninitialised memory on a device (zeroed on the cpu).
Tensor empty(const Shape& shape, DType dtype, Device device);
// A tensor of zeros on a device (empty, then zero).
Tensor zeros(const Shape& shape, DType dtype, Device device);
// Where each of tensors of `numels` elements starts in one arena that holds them all in order, and after the
// last the arena's length: each starts at a multiple of 4 elements (16 bytes of float32, as the kernels'
// vector paths want), so a tensor whose numel is not a multiple of 4 leaves a gap before the next.
std::vector<int64_t> arena_offsets(const std::vector<int64_t>& numels);
// `t` on `device`: `t` itself when it is there already, else a contiguous copy.
Tensor to_device(const Tensor& t, Device device);
// Each of `named` on the host (to_device), as save_safetensors writes them: the tensors of a checkpoint or
// an adapter, from the device the model is on.
std::vector<std::pair<std::string, Tensor>> on_host(std::vector<std::pair<std::string, Tensor>> named);
// A contiguous copy of `t` on its own device.
Tensor clone(const Tensor& t);
// Copies `src` into `dst`: contiguous tensors (or views) of the same size on one device.
void copy(const Tensor& dst, const Tensor& src);
// Copies dst.nbytes() bytes from host memory, or from `read`, into `dst`, a contiguous tensor (or view) on any
// device.
void copy_from_host(const Tensor& dst, const void* src);
// Queues a copy of `src` (contiguous, on any device) to host memory `dst` behind the device's work so far
// (Backend::copy_to_host_queued).
std::unique_ptr<PendingCopy> copy_to_host_queued(const Tensor& src, void* dst);
// Sets every element of a contiguous tensor to zero (gradients before accumulation).
void zero(const Tensor& t);
void copy_from_reader(const Tensor& dst, const HostReader& read);

}  // namespace tfm

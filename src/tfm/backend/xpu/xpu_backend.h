// The xpu backend: Intel GPUs through OpenCL 3.0. Each device gets its own context and one in-order queue;
// the storage of an xpu tensor holds a cl_mem (not a pointer: no arithmetic on it). Devices are chosen by
// device_selection.h's rules from TFM_XPU_PLATFORM, ZE_ENABLE_PCI_ID_DEVICE_ORDER and ZE_AFFINITY_MASK.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tfm/backend/backend.h"
#include "tfm/backend/block_cache.h"
#include "tfm/backend/kernel_registry.h"
#include "tfm/backend/xpu/device_capabilities.h"
#include "tfm/backend/xpu/device_graph.h"
#include "tfm/backend/xpu/device_selection.h"
#include "tfm/backend/xpu/opencl.h"
#include "tfm/backend/xpu/program_cache.h"

namespace tfm::xpu {

// What kernels need to run on one xpu device.
struct XpuDevice {
  XpuDevice(cl_platform_id platform, cl_device_id id, int index);

  cl_platform_id platform;
  cl_device_id id;
  std::string where;  // "xpu:0", for errors
  ClContext context;
  ClQueue queue;  // in order: every command of this device goes through it
  ProgramCache programs;
  DeviceCapabilities capabilities;
  DeviceInfo info;            // everything but free_memory, which is read when asked
  size_t max_allocation;      // CL_DEVICE_MAX_MEM_ALLOC_SIZE
  std::string no_command_buffers;  // why the device has no command buffers, when command_buffers is empty
  std::optional<CommandBufferApi> command_buffers;  // the form of its device graphs (device_graph.h)
  std::unique_ptr<Recording> recording;             // while capture() records the device's work
};

class XpuBackend final : public Backend {
 public:
  // Devices are discovered on first use; an invalid variable in `env` is reported then, as tfm::Error.
  explicit XpuBackend(SelectionEnv env);
  // Gives the cached buffers back to OpenCL (a backend of a test; the process-wide one is never destroyed).
  ~XpuBackend() override;

  DeviceType type() const override { return DeviceType::xpu; }
  int device_count() override;
  std::string why_no_devices() override;
  DeviceInfo info(int index) override;
  void* allocate(int index, size_t bytes) override;
  void deallocate(int index, void* p) override;
  void copy_from_host(int index, DeviceSpan dst, const void* src, size_t bytes) override;
  void copy_to_host(int index, void* dst, DeviceSpan src, size_t bytes) override;
  std::unique_ptr<PendingCopy> copy_to_host_queued(int index, void* dst, DeviceSpan src, size_t bytes) override;
  void copy_on_device(int index, DeviceSpan dst, DeviceSpan src, size_t bytes) override;
  void fill_zero(int index, DeviceSpan dst, size_t bytes) override;
  void synchronize(int index) override;
  size_t memory_allocated(int index) override;
  // The kernels store every dtype as it is and compute in float32, which any OpenCL device can; bfloat16 as
  // DeviceCapabilities::bf16 says.
  bool supports_dtype(int index, DType dtype) override;
  // Through cl_khr_command_buffer where the device offers it, as recorded launches elsewhere
  // (device_graph.h).
  std::unique_ptr<DeviceGraph> capture(int index, const std::function<void()>& work) override;

  // The OpenCL objects of xpu:`index`; throws tfm::Error when there is no such device.
  XpuDevice& device(int index);

 private:
  const std::vector<std::unique_ptr<XpuDevice>>& devices();
  // A new buffer of `size` bytes, or nullptr when the device is out of memory.
  cl_mem new_buffer(int index, size_t size);

  SelectionEnv env_;
  std::once_flag discovered_;
  std::vector<std::unique_ptr<XpuDevice>> devices_;
  BlockCache blocks_;  // clCreateBuffer and clReleaseMemObject kept out of steps
  std::string no_devices_;  // why devices_ is empty
};

// The backend of the process, configured from the environment.
XpuBackend& xpu_backend();

// Registers the xpu kernels of every op in float32, bfloat16 and float16 (xpu_kernels.h). Touches no OpenCL:
// the programs are built when a kernel first runs on a device.
void register_kernels(KernelRegistry& registry);

}  // namespace tfm::xpu

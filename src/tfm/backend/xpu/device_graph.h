// Device graphs of the xpu backend. While a device records, the kernels and on-device copies issued to it are
// kept instead of enqueued; the recording then becomes a graph of one of two forms. Where the device offers
// cl_khr_command_buffer, a finalized command buffer that a replay enqueues at once; elsewhere (NVIDIA's
// OpenCL, Debian's NEO), the recorded launches themselves, each kernel object holding its arguments, which a
// replay enqueues one after another: no host code of the step runs again, only clEnqueueNDRangeKernel. Work a
// graph cannot hold (a copy to or from the host, a wait for the device) ends the recording with CannotRecord,
// and the capture then gives no graph, so the caller runs the work as it is.
#pragma once

#include <CL/cl_ext.h>

#include <array>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tfm/backend/backend.h"
#include "tfm/backend/xpu/opencl.h"
#include "tfm/core/error.h"

namespace tfm::xpu {

struct XpuDevice;

// clCommandCopyBufferKHR as revisions 0.9.5 to 1.0 of the extension declare it: every command took a
// properties list after the queue (the headers tfm builds with declare the earlier form,
// clCommandCopyBufferKHR_fn).
using CommandCopyBufferWithPropertiesFn = cl_int(CL_API_CALL*)(cl_command_buffer_khr, cl_command_queue,
                                                               const cl_properties*, cl_mem, cl_mem, size_t,
                                                               size_t, size_t, cl_uint,
                                                               const cl_sync_point_khr*, cl_sync_point_khr*,
                                                               cl_mutable_command_khr*);

// The extension's entry points, which the ICD loader hands out per platform. Of the ones tfm calls, only the
// copy changed its arguments between the provisional revisions and 1.0 (clCommandNDRangeKernelKHR always took
// a properties list there): one of `copy` and `copy_with_properties` is set, by the device's revision.
struct CommandBufferApi {
  clCreateCommandBufferKHR_fn create;
  clFinalizeCommandBufferKHR_fn finalize;
  clReleaseCommandBufferKHR_fn release;
  clEnqueueCommandBufferKHR_fn enqueue;
  clCommandNDRangeKernelKHR_fn kernel;
  clCommandCopyBufferKHR_fn copy;
  CommandCopyBufferWithPropertiesFn copy_with_properties;

  // The entry points when `device` offers cl_khr_command_buffer for a queue without properties (the backend's
  // in-order queue); otherwise nullopt, and `why_not` says what is missing.
  static std::optional<CommandBufferApi> load(cl_platform_id platform, cl_device_id device,
                                              std::string& why_not);
};

// Raised by a command that a recording cannot hold.
class CannotRecord : public Error {
 public:
  using Error::Error;
};

// The argument values of a launch as set on its cl_kernel, kept so that a recording can set them again on a
// kernel of its own.
struct KernelArgs {
  struct Value {
    size_t size;
    std::array<unsigned char, 8> bytes;  // a cl_mem, cl_long, cl_int or cl_float
  };
  std::vector<Value> values;    // by argument index
  std::vector<cl_mem> buffers;  // those values that are buffers (not null)

  template <typename T>
  void add(const T& value) {
    static_assert(sizeof(T) <= sizeof(Value::bytes));
    Value& v = values.emplace_back(Value{sizeof(T), {}});
    std::memcpy(v.bytes.data(), &value, sizeof(T));
  }
};

// The work of one device being recorded, in order. A recorded kernel is a kernel object of its own, created
// from the launched one's program with the launch's argument values: later launches of the shared cl_kernel
// set its arguments again (and PoCL 3.1 reads a command buffer's kernel arguments when the buffer runs; its
// clCloneKernel crashes on a null buffer argument). The buffers commands use are retained until the graph
// goes, since arguments do not keep them.
class Recording {
 public:
  struct Launch {
    ClKernel kernel;
    const char* name;
    std::array<size_t, 2> global, group;
  };
  struct Copy {
    cl_mem src;
    size_t src_offset;
    cl_mem dst;
    size_t dst_offset;
    size_t bytes;
  };
  using Command = std::variant<Launch, Copy>;

  explicit Recording(std::string where) : where_(std::move(where)) {}

  void kernel(cl_kernel kernel, const char* name, const KernelArgs& args, const std::array<size_t, 2>& global,
              const std::array<size_t, 2>& group);
  void copy(cl_mem src, size_t src_offset, cl_mem dst, size_t dst_offset, size_t bytes);

  // The recorded work as a graph replayed on `queue`: a command buffer through `command_buffers` where the
  // device has them, the recorded launches otherwise.
  std::unique_ptr<DeviceGraph> finish(const std::optional<CommandBufferApi>& command_buffers,
                                      cl_command_queue queue);

 private:
  void retain(cl_mem buffer);

  std::string where_;
  std::vector<Command> commands_;
  std::vector<ClBuffer> buffers_;  // a reference of each buffer the commands use
};

// A launch of `kernel`, whose arguments are set to `args`, on `device`: recorded while the device records,
// enqueued otherwise.
void enqueue_kernel(XpuDevice& device, cl_kernel kernel, const char* name, const KernelArgs& args,
                    const std::array<size_t, 2>& global, const std::array<size_t, 2>& group);

// Throws CannotRecord naming `what` ("a copy to the host") while `device` records.
void refuse_while_recording(const XpuDevice& device, std::string_view what);

// The work of `work` on `device` as a graph; nullptr when `work` did something a graph cannot hold (then none
// of its commands ran), which is logged. The caller (XpuBackend::capture) allows one capture a device at a
// time.
std::unique_ptr<DeviceGraph> record(XpuDevice& device, const std::function<void()>& work);

}  // namespace tfm::xpu

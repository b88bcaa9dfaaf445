#include "tfm/backend/xpu/device_graph.h"

#include "tfm/backend/xpu/kernel_timeline.h"
#include "tfm/backend/xpu/xpu_backend.h"
#include "tfm/core/logging.h"

namespace tfm::xpu {
namespace {

template <typename Fn>
Fn entry_point(cl_platform_id platform, const char* name) {
  return reinterpret_cast<Fn>(clGetExtensionFunctionAddressForPlatform(platform, name));
}

using ClEvent = ClHandle<cl_event, clReleaseEvent>;

// Revision 0.9.5 gave every command a properties argument; 1.0 is the ratified form. A later major revision
// may change the entry points again, so tfm records no graphs there rather than call them with the wrong
// arguments.
constexpr cl_version kFirstRevisionWithCommandProperties = CL_MAKE_VERSION(0, 9, 5);
constexpr cl_version kFirstUnknownRevision = CL_MAKE_VERSION(2, 0, 0);

// The revision of extension `name` the device reports (CL_DEVICE_EXTENSIONS_WITH_VERSION, OpenCL 3.0).
cl_version extension_version(cl_device_id device, std::string_view name) {
  size_t bytes = 0;
  cl_check(clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS_WITH_VERSION, 0, nullptr, &bytes),
           "clGetDeviceInfo(CL_DEVICE_EXTENSIONS_WITH_VERSION)");
  std::vector<cl_name_version> extensions(bytes / sizeof(cl_name_version));
  cl_check(clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS_WITH_VERSION, bytes, extensions.data(), nullptr),
           "clGetDeviceInfo(CL_DEVICE_EXTENSIONS_WITH_VERSION)");
  for (const cl_name_version& e : extensions) {
    if (name == e.name) return e.version;
  }
  return 0;
}

std::string revision_name(cl_version v) {
  return std::to_string(CL_VERSION_MAJOR(v)) + "." + std::to_string(CL_VERSION_MINOR(v)) + "." +
         std::to_string(CL_VERSION_PATCH(v));
}

class XpuGraph final : public DeviceGraph {
 public:
  XpuGraph(const CommandBufferApi& api, std::string where, cl_command_buffer_khr commands,
           std::vector<ClKernel> kernels, std::vector<ClBuffer> buffers)
      : api_(api),
        where_(std::move(where)),
        commands_(commands),
        kernels_(std::move(kernels)),
        buffers_(std::move(buffers)) {}

  ~XpuGraph() override {
    // The queue may still run the last replay: the command buffer and its memory go once it is done.
    if (const cl_event last = last_replay_.get()) clWaitForEvents(1, &last);
    api_.release(commands_);
  }
  XpuGraph(const XpuGraph&) = delete;
  XpuGraph& operator=(const XpuGraph&) = delete;

  // A command buffer without simultaneous use may not be enqueued while it is pending, so a replay first
  // waits for the one before (normally long done: a step reads its results before the next one replays).
  void replay() override {
    if (const cl_event last = last_replay_.get())
      cl_check(clWaitForEvents(1, &last), "clWaitForEvents(the previous replay)", where_);
    cl_event done = nullptr;
    cl_check(api_.enqueue(0, nullptr, commands_, 0, nullptr, &done), "clEnqueueCommandBufferKHR", where_);
    last_replay_ = ClEvent(done);
  }

 private:
  CommandBufferApi api_;
  std::string where_;
  cl_command_buffer_khr commands_;
  std::vector<ClKernel> kernels_;
  std::vector<ClBuffer> buffers_;
  ClEvent last_replay_;
};

}  // namespace

std::optional<CommandBufferApi> CommandBufferApi::load(cl_platform_id platform, cl_device_id device,
                                                       std::string& why_not) {
  if (!has_extension(device, CL_KHR_COMMAND_BUFFER_EXTENSION_NAME)) {
    why_not = "the device does not offer " CL_KHR_COMMAND_BUFFER_EXTENSION_NAME;
    return std::nullopt;
  }
  const cl_version revision = extension_version(device, CL_KHR_COMMAND_BUFFER_EXTENSION_NAME);
  if (revision >= kFirstUnknownRevision) {
    why_not = "its " CL_KHR_COMMAND_BUFFER_EXTENSION_NAME " is revision " + revision_name(revision) +
              ", and tfm knows the entry points of revisions before " + revision_name(kFirstUnknownRevision);
    return std::nullopt;
  }
  const auto required = device_value<cl_command_queue_properties>(
      device, CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR,
      "CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR");
  if (required != 0) {
    why_not = "its command buffers need queue properties " + std::to_string(required) +
              " that the backend's queue does not have";
    return std::nullopt;
  }
  CommandBufferApi api{
      .create = entry_point<clCreateCommandBufferKHR_fn>(platform, "clCreateCommandBufferKHR"),
      .finalize = entry_point<clFinalizeCommandBufferKHR_fn>(platform, "clFinalizeCommandBufferKHR"),
      .release = entry_point<clReleaseCommandBufferKHR_fn>(platform, "clReleaseCommandBufferKHR"),
      .enqueue = entry_point<clEnqueueCommandBufferKHR_fn>(platform, "clEnqueueCommandBufferKHR"),
      .kernel = entry_point<clCommandNDRangeKernelKHR_fn>(platform, "clCommandNDRangeKernelKHR"),
      .copy = nullptr,
      .copy_with_properties = nullptr,
  };
  if (revision >= kFirstRevisionWithCommandProperties) {
    api.copy_with_properties =
        entry_point<CommandCopyBufferWithPropertiesFn>(platform, "clCommandCopyBufferKHR");
  } else {
    api.copy = entry_point<clCommandCopyBufferKHR_fn>(platform, "clCommandCopyBufferKHR");
  }
  if (!api.create || !api.finalize || !api.release || !api.enqueue || !api.kernel ||
      !(api.copy || api.copy_with_properties)) {
    why_not = "the platform does not give the entry points of " CL_KHR_COMMAND_BUFFER_EXTENSION_NAME;
    return std::nullopt;
  }
  return api;
}

Recording::Recording(const CommandBufferApi& api, cl_command_queue queue, std::string where)
    : api_(api), where_(std::move(where)) {
  cl_int status = CL_SUCCESS;
  commands_ = api_.create(1, &queue, nullptr, &status);
  cl_check(status, "clCreateCommandBufferKHR", where_);
}

Recording::~Recording() {
  if (commands_) api_.release(commands_);
}

void Recording::retain(cl_mem buffer) {
  cl_check(clRetainMemObject(buffer), "clRetainMemObject", where_);
  buffers_.emplace_back(buffer);
}

void Recording::kernel(cl_kernel kernel, const char* name, const KernelArgs& args,
                       const std::array<size_t, 2>& global, const std::array<size_t, 2>& group) {
  for (cl_mem b : args.buffers) retain(b);
  cl_program program = nullptr;
  cl_check(clGetKernelInfo(kernel, CL_KERNEL_PROGRAM, sizeof program, &program, nullptr),
           "clGetKernelInfo(CL_KERNEL_PROGRAM)", where_);
  cl_int status = CL_SUCCESS;
  ClKernel own(clCreateKernel(program, name, &status));
  cl_check(status, std::string("clCreateKernel(") + name + ")", where_);
  for (size_t i = 0; i < args.values.size(); ++i) {
    cl_check(
        clSetKernelArg(own.get(), static_cast<cl_uint>(i), args.values[i].size, args.values[i].bytes.data()),
        std::string("clSetKernelArg(") + name + ", " + std::to_string(i) + ")", where_);
  }
  cl_sync_point_khr done = 0;
  cl_check(api_.kernel(commands_, nullptr, nullptr, own.get(), 2, nullptr, global.data(), group.data(),
                       waits(), wait_list(), &done, nullptr),
           std::string("clCommandNDRangeKernelKHR(") + name + ")", where_);
  kernels_.push_back(std::move(own));
  previous_ = done;
  has_previous_ = true;
}

void Recording::copy(cl_mem src, size_t src_offset, cl_mem dst, size_t dst_offset, size_t bytes) {
  retain(src);
  retain(dst);
  cl_sync_point_khr done = 0;
  const cl_int status =
      api_.copy_with_properties
          ? api_.copy_with_properties(commands_, nullptr, nullptr, src, dst, src_offset, dst_offset, bytes,
                                      waits(), wait_list(), &done, nullptr)
          : api_.copy(commands_, nullptr, src, dst, src_offset, dst_offset, bytes, waits(), wait_list(),
                      &done, nullptr);
  cl_check(status, "clCommandCopyBufferKHR", where_);
  previous_ = done;
  has_previous_ = true;
}

std::unique_ptr<DeviceGraph> Recording::finish() {
  cl_check(api_.finalize(commands_), "clFinalizeCommandBufferKHR", where_);
  return std::make_unique<XpuGraph>(api_, where_, std::exchange(commands_, nullptr), std::move(kernels_),
                                    std::move(buffers_));
}

void enqueue_kernel(XpuDevice& device, cl_kernel kernel, const char* name, const KernelArgs& args,
                    const std::array<size_t, 2>& global, const std::array<size_t, 2>& group) {
  if (device.recording) {
    device.recording->kernel(kernel, name, args, global, group);
    return;
  }
  cl_event done = nullptr;
  const cl_int status =
      clEnqueueNDRangeKernel(device.queue.get(), kernel, 2, nullptr, global.data(), group.data(), 0, nullptr,
                             kernel_timeline_enabled() ? &done : nullptr);
  if (status != CL_SUCCESS) cl_check(status, std::string("clEnqueueNDRangeKernel(") + name + ")", device.where);
  if (done) kernel_timeline_add(name, done);
}

void refuse_while_recording(const XpuDevice& device, std::string_view what) {
  if (device.recording) {
    throw CannotRecord(device.where + ": a device graph cannot hold " + std::string(what));
  }
}

std::unique_ptr<DeviceGraph> record(XpuDevice& device, const std::function<void()>& work) {
  if (!device.command_buffers) {
    logging::log_once(logging::Level::info, device.where + " (" + device.info.name +
                                                ") records no device graphs: " + device.no_command_buffers);
    return nullptr;
  }
  device.recording = std::make_unique<Recording>(*device.command_buffers, device.queue.get(), device.where);
  try {
    work();
  } catch (const CannotRecord& e) {
    device.recording.reset();
    logging::log(logging::Level::warning, std::string(e.what()) + "; the work runs without a graph");
    return nullptr;
  } catch (...) {
    device.recording.reset();
    throw;
  }
  const std::unique_ptr<Recording> recorded = std::move(device.recording);
  return recorded->finish();
}

}  // namespace tfm::xpu

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

// Enqueues `kernel`, its arguments set, on `queue`; with the kernel timeline on, its event goes there.
void launch(cl_command_queue queue, cl_kernel kernel, const char* name, const std::array<size_t, 2>& global,
            const std::array<size_t, 2>& group, const std::string& where) {
  cl_event done = nullptr;
  const cl_int status = clEnqueueNDRangeKernel(queue, kernel, 2, nullptr, global.data(), group.data(), 0,
                                               nullptr, kernel_timeline_enabled() ? &done : nullptr);
  if (status != CL_SUCCESS) cl_check(status, std::string("clEnqueueNDRangeKernel(") + name + ")", where);
  if (done) kernel_timeline_add(name, done);
}

// The commands in a finalized command buffer, each waiting for the one before it, as on the in-order queue.
class CommandBufferGraph final : public DeviceGraph {
 public:
  CommandBufferGraph(const CommandBufferApi& api, cl_command_queue queue, std::string where,
                     std::vector<Recording::Command> commands, std::vector<ClBuffer> buffers)
      : api_(api), where_(std::move(where)), commands_(std::move(commands)), buffers_(std::move(buffers)) {
    cl_int status = CL_SUCCESS;
    buffer_ = api_.create(1, &queue, nullptr, &status);
    cl_check(status, "clCreateCommandBufferKHR", where_);
    try {
      cl_sync_point_khr previous = 0;
      const cl_sync_point_khr* after = nullptr;  // the first command waits for nothing
      for (const Recording::Command& command : commands_) {
        previous = add(command, after);
        after = &previous;
      }
      cl_check(api_.finalize(buffer_), "clFinalizeCommandBufferKHR", where_);
    } catch (...) {
      api_.release(buffer_);
      throw;
    }
  }

  ~CommandBufferGraph() override {
    // The queue may still run the last replay: the command buffer and its memory go once it is done.
    if (const cl_event last = last_replay_.get()) clWaitForEvents(1, &last);
    api_.release(buffer_);
  }
  CommandBufferGraph(const CommandBufferGraph&) = delete;
  CommandBufferGraph& operator=(const CommandBufferGraph&) = delete;

  // A command buffer without simultaneous use may not be enqueued while it is pending, so a replay first
  // waits for the one before (normally long done: a step reads its results before the next one replays).
  void replay() override {
    if (const cl_event last = last_replay_.get())
      cl_check(clWaitForEvents(1, &last), "clWaitForEvents(the previous replay)", where_);
    cl_event done = nullptr;
    cl_check(api_.enqueue(0, nullptr, buffer_, 0, nullptr, &done), "clEnqueueCommandBufferKHR", where_);
    last_replay_ = ClEvent(done);
  }

 private:
  // Adds `command` after the sync point `after` (none for the first) and returns its own.
  cl_sync_point_khr add(const Recording::Command& command, const cl_sync_point_khr* after) {
    const cl_uint waits = after ? 1 : 0;
    cl_sync_point_khr done = 0;
    if (const auto* k = std::get_if<Recording::Launch>(&command)) {
      cl_check(api_.kernel(buffer_, nullptr, nullptr, k->kernel.get(), 2, nullptr, k->global.data(),
                           k->group.data(), waits, after, &done, nullptr),
               std::string("clCommandNDRangeKernelKHR(") + k->name + ")", where_);
      return done;
    }
    const auto& c = std::get<Recording::Copy>(command);
    const cl_int status =
        api_.copy_with_properties
            ? api_.copy_with_properties(buffer_, nullptr, nullptr, c.src, c.dst, c.src_offset, c.dst_offset,
                                        c.bytes, waits, after, &done, nullptr)
            : api_.copy(buffer_, nullptr, c.src, c.dst, c.src_offset, c.dst_offset, c.bytes, waits, after,
                        &done, nullptr);
    cl_check(status, "clCommandCopyBufferKHR", where_);
    return done;
  }

  CommandBufferApi api_;
  std::string where_;
  std::vector<Recording::Command> commands_;  // the kernels the buffer runs
  std::vector<ClBuffer> buffers_;
  cl_command_buffer_khr buffer_ = nullptr;
  ClEvent last_replay_;
};

// The recorded launches and copies, enqueued again one by one on the in-order queue. Each kernel object keeps
// its arguments, so a replay sets none.
class LaunchListGraph final : public DeviceGraph {
 public:
  LaunchListGraph(cl_command_queue queue, std::string where, std::vector<Recording::Command> commands,
                  std::vector<ClBuffer> buffers)
      : queue_(retained(queue, where)),
        where_(std::move(where)),
        commands_(std::move(commands)),
        buffers_(std::move(buffers)) {}

  void replay() override {
    for (const Recording::Command& command : commands_) {
      if (const auto* k = std::get_if<Recording::Launch>(&command)) {
        launch(queue_.get(), k->kernel.get(), k->name, k->global, k->group, where_);
        continue;
      }
      const auto& c = std::get<Recording::Copy>(command);
      cl_check(clEnqueueCopyBuffer(queue_.get(), c.src, c.dst, c.src_offset, c.dst_offset, c.bytes, 0,
                                   nullptr, nullptr),
               "clEnqueueCopyBuffer", where_);
    }
  }

 private:
  // A reference of the graph's own to `queue`, taken before anything owns it.
  static ClQueue retained(cl_command_queue queue, const std::string& where) {
    cl_check(clRetainCommandQueue(queue), "clRetainCommandQueue", where);
    return ClQueue(queue);
  }

  ClQueue queue_;
  std::string where_;
  std::vector<Recording::Command> commands_;
  std::vector<ClBuffer> buffers_;
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
  commands_.emplace_back(Launch{std::move(own), name, global, group});
}

void Recording::copy(cl_mem src, size_t src_offset, cl_mem dst, size_t dst_offset, size_t bytes) {
  retain(src);
  retain(dst);
  commands_.emplace_back(Copy{src, src_offset, dst, dst_offset, bytes});
}

std::unique_ptr<DeviceGraph> Recording::finish(const std::optional<CommandBufferApi>& command_buffers,
                                               cl_command_queue queue) {
  if (command_buffers) {
    return std::make_unique<CommandBufferGraph>(*command_buffers, queue, where_, std::move(commands_),
                                                std::move(buffers_));
  }
  return std::make_unique<LaunchListGraph>(queue, where_, std::move(commands_), std::move(buffers_));
}

void enqueue_kernel(XpuDevice& device, cl_kernel kernel, const char* name, const KernelArgs& args,
                    const std::array<size_t, 2>& global, const std::array<size_t, 2>& group) {
  if (device.recording) {
    device.recording->kernel(kernel, name, args, global, group);
    return;
  }
  launch(device.queue.get(), kernel, name, global, group, device.where);
}

void refuse_while_recording(const XpuDevice& device, std::string_view what) {
  if (device.recording) {
    throw CannotRecord(device.where + ": a device graph cannot hold " + std::string(what));
  }
}

std::unique_ptr<DeviceGraph> record(XpuDevice& device, const std::function<void()>& work) {
  if (!device.command_buffers) {
    logging::log_once(logging::Level::info,
                      device.where + " (" + device.info.name +
                          ") replays device graphs launch by launch: " + device.no_command_buffers);
  }
  device.recording = std::make_unique<Recording>(device.where);
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
  return recorded->finish(device.command_buffers, device.queue.get());
}

}  // namespace tfm::xpu

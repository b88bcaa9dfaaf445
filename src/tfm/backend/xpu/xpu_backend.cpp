#include "tfm/backend/xpu/xpu_backend.h"

#include <CL/cl_ext.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "tfm/backend/xpu/kernel_timeline.h"
#include "tfm/core/error.h"

namespace tfm::xpu {
namespace {

// Host-to-device copies smaller than this are queued without waiting (copy_from_host).
constexpr size_t kQueuedCopyBelow = size_t{1} << 20;

// Intel's driver applies ZE_AFFINITY_MASK itself during its initialisation, which the first clGetPlatformIDs
// of the process triggers. tfm applies the mask to its own ordered list (the same rules, on every platform),
// so the driver must not apply it first: "1" on two cards would leave card 1, then select index 1 of a
// one-card list. The variable is hidden for the duration of discovery and restored after it. (setenv is not
// thread-safe; discovery runs once, normally at start-up, before other threads read the environment.)
class HiddenVariable {
 public:
  explicit HiddenVariable(const char* name) : name_(name) {
    if (const char* value = std::getenv(name)) {
      value_ = value;
      unsetenv(name);
    }
  }
  ~HiddenVariable() {
    if (value_) setenv(name_, value_->c_str(), 1);
  }
  HiddenVariable(const HiddenVariable&) = delete;
  HiddenVariable& operator=(const HiddenVariable&) = delete;

 private:
  const char* name_;
  std::optional<std::string> value_;
};

struct FoundDevice {
  cl_platform_id platform;
  cl_device_id id;
  DeviceCandidate candidate;
};

DeviceCandidate describe(cl_device_id id, const std::string& platform_name,
                         const std::string& platform_vendor) {
  DeviceCandidate c;
  c.platform_name = platform_name;
  c.platform_vendor = platform_vendor;
  c.gpu = (device_value<cl_device_type>(id, CL_DEVICE_TYPE, "CL_DEVICE_TYPE") & CL_DEVICE_TYPE_GPU) != 0;
  c.integrated =
      device_value<cl_bool>(id, CL_DEVICE_HOST_UNIFIED_MEMORY, "CL_DEVICE_HOST_UNIFIED_MEMORY") != CL_FALSE;
  if (has_extension(id, "cl_khr_pci_bus_info")) {
    const auto bus = device_value<cl_device_pci_bus_info_khr>(id, CL_DEVICE_PCI_BUS_INFO_KHR,
                                                              "CL_DEVICE_PCI_BUS_INFO_KHR");
    c.pci = PciAddress{bus.pci_domain, bus.pci_bus, bus.pci_device, bus.pci_function};
  }
  return c;
}

struct Discovery {
  std::vector<std::string> platforms;  // the name of every platform installed
  std::vector<FoundDevice> found;      // every device of the platforms that can match
};

// What the loader and drivers report, in their order.
Discovery find_devices(const SelectionSettings& settings) {
  HiddenVariable hidden("ZE_AFFINITY_MASK");
  cl_uint count = 0;
  cl_int status = clGetPlatformIDs(0, nullptr, &count);
  if (status == CL_PLATFORM_NOT_FOUND_KHR || (status == CL_SUCCESS && count == 0)) return {};  // no driver
  cl_check(status, "clGetPlatformIDs");
  std::vector<cl_platform_id> platforms(count);
  cl_check(clGetPlatformIDs(count, platforms.data(), nullptr), "clGetPlatformIDs");

  Discovery discovery;
  std::vector<FoundDevice>& found = discovery.found;
  for (cl_platform_id platform : platforms) {
    const std::string name = platform_string(platform, CL_PLATFORM_NAME, "CL_PLATFORM_NAME");
    const std::string vendor = platform_string(platform, CL_PLATFORM_VENDOR, "CL_PLATFORM_VENDOR");
    discovery.platforms.push_back(name);
    if (!platform_matches(settings, name, vendor)) continue;
    cl_uint n = 0;
    status = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n);
    if (status == CL_DEVICE_NOT_FOUND) continue;
    cl_check(status, "clGetDeviceIDs", name);
    std::vector<cl_device_id> ids(n);
    cl_check(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr), "clGetDeviceIDs", name);
    for (cl_device_id id : ids) found.push_back({platform, id, describe(id, name, vendor)});
  }
  return discovery;
}

// Why discovery selected no device, for the error of a request for one.
std::string why_none_selected(const Discovery& discovery, const std::vector<DeviceCandidate>& candidates,
                              const SelectionSettings& settings, const SelectionEnv& env) {
  if (discovery.platforms.empty())
    return "no OpenCL platform is installed: the OpenCL ICD loader found none, and Intel GPUs need "
           "intel-opencl-icd";
  std::string names;
  for (const std::string& name : discovery.platforms) names += (names.empty() ? "'" : ", '") + name + "'";
  if (discovery.found.empty() && settings.platform.empty()) {
    return "no Intel OpenCL platform among " + names +
           ": Intel GPUs need intel-opencl-icd, and TFM_XPU_PLATFORM chooses another platform";
  }
  if (discovery.found.empty())
    return "no OpenCL platform named like TFM_XPU_PLATFORM '" + settings.platform + "' among " + names;
  SelectionSettings unmasked = settings;
  unmasked.mask.reset();
  const size_t selectable = select_devices(candidates, unmasked).size();
  if (selectable > 0) {
    return "ZE_AFFINITY_MASK '" + env.affinity_mask.value_or("") + "' selects none of the " +
           std::to_string(selectable) + " devices";
  }
  return "the Intel OpenCL platform has no GPU";
}

ClContext create_context(cl_platform_id platform, cl_device_id id, const std::string& where) {
  const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM,
                                              reinterpret_cast<cl_context_properties>(platform), 0};
  cl_int status = CL_SUCCESS;
  ClContext context(clCreateContext(properties, 1, &id, nullptr, nullptr, &status));
  cl_check(status, "clCreateContext", where);
  return context;
}

ClQueue create_queue(cl_context context, cl_device_id id, const std::string& where) {
  cl_int status = CL_SUCCESS;
  // In order by default; profiling its commands only for the kernel timeline.
  const cl_queue_properties profiling[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
  ClQueue queue(clCreateCommandQueueWithProperties(context, id,
                                                   kernel_timeline_enabled() ? profiling : nullptr, &status));
  cl_check(status, "clCreateCommandQueueWithProperties", where);
  return queue;
}

DeviceInfo read_info(cl_device_id id, int index, const DeviceCapabilities& capabilities) {
  DeviceInfo d;
  d.device = Device{DeviceType::xpu, index};
  d.name = device_string(id, CL_DEVICE_NAME, "CL_DEVICE_NAME");
  d.total_memory = device_value<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE, "CL_DEVICE_GLOBAL_MEM_SIZE");
  d.free_memory = d.total_memory;
  // CL_DEVICE_VERSION is "OpenCL <major>.<minor> <driver-specific text>"; the first two words are the API.
  const std::string version = device_string(id, CL_DEVICE_VERSION, "CL_DEVICE_VERSION");
  const size_t api_end = version.find(' ', version.find(' ') + 1);
  d.driver_version = version.substr(0, api_end) + ", driver " + capabilities.driver_version;
  d.xpu_capabilities = capabilities;
  return d;
}

// Free bytes where the driver reports them (cl_amd_device_attribute_query); OpenCL itself has no such query,
// so elsewhere this is the total.
size_t free_memory(const XpuDevice& d) {
  if (!has_extension(d.id, "cl_amd_device_attribute_query")) return d.info.total_memory;
  size_t kib[2] = {0, 0};  // total free, largest free block
  cl_check(clGetDeviceInfo(d.id, CL_DEVICE_GLOBAL_FREE_MEMORY_AMD, sizeof(kib), kib, nullptr),
           "clGetDeviceInfo(CL_DEVICE_GLOBAL_FREE_MEMORY_AMD)", d.where);
  return kib[0] * 1024;
}

cl_mem as_buffer(const void* p) {
  return static_cast<cl_mem>(const_cast<void*>(p));
}

}  // namespace

XpuDevice::XpuDevice(cl_platform_id platform, cl_device_id id, int index)
    : platform(platform),
      id(id),
      where("xpu:" + std::to_string(index)),
      context(create_context(platform, id, where)),
      queue(create_queue(context.get(), id, where)),
      programs(context.get(), id, where),
      capabilities(read_capabilities(platform, id)),
      info(read_info(id, index, capabilities)),
      max_allocation(device_value<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, "CL_DEVICE_MAX_MEM_ALLOC_SIZE")),
      command_buffers(CommandBufferApi::load(platform, id, no_command_buffers)) {}

XpuBackend::XpuBackend(SelectionEnv env)
    : env_(std::move(env)),
      blocks_([this](int index, size_t size) -> void* { return new_buffer(index, size); },
              [](int, void* buffer) { clReleaseMemObject(as_buffer(buffer)); }) {}

XpuBackend::~XpuBackend() {
  blocks_.release_all_cached();  // before devices_ releases the contexts the buffers belong to
}

const std::vector<std::unique_ptr<XpuDevice>>& XpuBackend::devices() {
  // A failed discovery (an invalid variable, a driver error) throws and is tried again on the next call.
  std::call_once(discovered_, [this] {
    const SelectionSettings settings = parse_selection_env(env_);  // before any driver reads the variables
    const Discovery discovery = find_devices(settings);
    const std::vector<FoundDevice>& found = discovery.found;
    std::vector<DeviceCandidate> candidates;
    for (const FoundDevice& f : found) candidates.push_back(f.candidate);
    std::vector<std::unique_ptr<XpuDevice>> devices;
    for (size_t i : select_devices(candidates, settings)) {
      devices.push_back(
          std::make_unique<XpuDevice>(found[i].platform, found[i].id, static_cast<int>(devices.size())));
    }
    if (devices.empty()) no_devices_ = why_none_selected(discovery, candidates, settings, env_);
    devices_ = std::move(devices);
  });
  return devices_;
}

int XpuBackend::device_count() {
  return static_cast<int>(devices().size());
}

XpuDevice& XpuBackend::device(int index) {
  const auto& all = devices();
  check(index >= 0 && static_cast<size_t>(index) < all.size(), "xpu:", index, " does not exist; there are ",
        all.size(), " xpu devices", all.empty() ? ": " + no_devices_ : "");
  return *all[index];
}

std::string XpuBackend::why_no_devices() {
  devices();
  return no_devices_;
}

DeviceInfo XpuBackend::info(int index) {
  const XpuDevice& d = device(index);
  DeviceInfo info = d.info;
  info.free_memory = free_memory(d);
  return info;
}

void* XpuBackend::allocate(int index, size_t bytes) {
  XpuDevice& d = device(index);
  check(bytes <= d.max_allocation, d.where, ": cannot allocate ", bytes, " bytes: ", d.info.name,
        " holds at most ", d.max_allocation, " bytes in one buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE)");
  void* buffer = blocks_.allocate(index, bytes);
  if (!buffer) {
    throw_error(d.where, ": cannot allocate ", bytes, " bytes: out of device memory (", d.info.total_memory,
                " bytes in all)");
  }
  return buffer;
}

void XpuBackend::deallocate(int index, void* p) {
  blocks_.deallocate(index, p);
}

size_t XpuBackend::memory_allocated(int index) {
  return blocks_.allocated(index);
}

cl_mem XpuBackend::new_buffer(int index, size_t size) {
  XpuDevice& d = device(index);
  cl_int status = CL_SUCCESS;
  cl_mem buffer = clCreateBuffer(d.context.get(), CL_MEM_READ_WRITE, size, nullptr, &status);
  if (status == CL_MEM_OBJECT_ALLOCATION_FAILURE || status == CL_OUT_OF_RESOURCES) return nullptr;
  cl_check(status, "clCreateBuffer", d.where + ": cannot allocate " + std::to_string(size) + " bytes");
  return buffer;
}

void XpuBackend::copy_from_host(int index, DeviceSpan dst, const void* src, size_t bytes) {
  const XpuDevice& d = device(index);
  refuse_while_recording(d, "a copy from the host");
  if (bytes == 0) return;  // OpenCL rejects empty transfers
  if (bytes >= kQueuedCopyBelow) {
    cl_check(clEnqueueWriteBuffer(d.queue.get(), as_buffer(dst.base), CL_TRUE, dst.offset, bytes, src, 0,
                                  nullptr, nullptr),
             "clEnqueueWriteBuffer", d.where);
    return;
  }
  // A blocking write would wait for every kernel queued before it. Small copies (a step's inputs) are queued
  // from a copy of the bytes that the transfer owns and its completion frees.
  auto owned = std::make_unique<char[]>(bytes);
  std::memcpy(owned.get(), src, bytes);
  cl_event done = nullptr;
  cl_check(clEnqueueWriteBuffer(d.queue.get(), as_buffer(dst.base), CL_FALSE, dst.offset, bytes, owned.get(), 0,
                                nullptr, &done),
           "clEnqueueWriteBuffer", d.where);
  const auto free_bytes = [](cl_event, cl_int, void* p) { delete[] static_cast<char*>(p); };
  const cl_int status = clSetEventCallback(done, CL_COMPLETE, free_bytes, owned.get());
  if (status == CL_SUCCESS) {
    owned.release();
  } else {
    clWaitForEvents(1, &done);  // the bytes must outlive the transfer
  }
  clReleaseEvent(done);
  cl_check(status, "clSetEventCallback", d.where);
}

void XpuBackend::copy_to_host(int index, void* dst, DeviceSpan src, size_t bytes) {
  const XpuDevice& d = device(index);
  refuse_while_recording(d, "a copy to the host");
  if (bytes == 0) return;
  cl_check(clEnqueueReadBuffer(d.queue.get(), as_buffer(src.base), CL_TRUE, src.offset, bytes, dst, 0,
                               nullptr, nullptr),
           "clEnqueueReadBuffer", d.where);
}

namespace {

// A non-blocking read and the event of its completion.
class XpuPendingCopy final : public PendingCopy {
 public:
  XpuPendingCopy(cl_event done, std::string where) : done_(done), where_(std::move(where)) {}
  ~XpuPendingCopy() override {
    if (!done_) return;
    clWaitForEvents(1, &done_);
    clReleaseEvent(done_);
  }
  void wait() override {
    if (!done_) return;
    const cl_int status = clWaitForEvents(1, &done_);
    clReleaseEvent(done_);
    done_ = nullptr;
    cl_check(status, "clWaitForEvents", where_);
  }

 private:
  cl_event done_;
  std::string where_;
};

}  // namespace

std::unique_ptr<PendingCopy> XpuBackend::copy_to_host_queued(int index, void* dst, DeviceSpan src, size_t bytes) {
  const XpuDevice& d = device(index);
  refuse_while_recording(d, "a copy to the host");
  if (bytes == 0) return Backend::copy_to_host_queued(index, dst, src, bytes);
  cl_event done = nullptr;
  cl_check(clEnqueueReadBuffer(d.queue.get(), as_buffer(src.base), CL_FALSE, src.offset, bytes, dst, 0, nullptr,
                               &done),
           "clEnqueueReadBuffer", d.where);
  auto copy = std::make_unique<XpuPendingCopy>(done, d.where);
  // The device starts on what is queued while the host goes on (a queue may hold commands until flushed).
  cl_check(clFlush(d.queue.get()), "clFlush", d.where);
  return copy;
}

void XpuBackend::copy_on_device(int index, DeviceSpan dst, DeviceSpan src, size_t bytes) {
  if (bytes == 0) return;
  XpuDevice& d = device(index);
  if (d.recording) {
    d.recording->copy(as_buffer(src.base), src.offset, as_buffer(dst.base), dst.offset, bytes);
    return;
  }
  cl_check(clEnqueueCopyBuffer(d.queue.get(), as_buffer(src.base), as_buffer(dst.base), src.offset,
                               dst.offset, bytes, 0, nullptr, nullptr),
           "clEnqueueCopyBuffer", d.where);
}

void XpuBackend::fill_zero(int index, DeviceSpan dst, size_t bytes) {
  if (bytes == 0) return;
  XpuDevice& d = device(index);
  refuse_while_recording(d, "a fill with zeros");
  const cl_uchar zero = 0;
  cl_check(clEnqueueFillBuffer(d.queue.get(), as_buffer(dst.base), &zero, sizeof zero, dst.offset, bytes, 0, nullptr,
                               nullptr),
           "clEnqueueFillBuffer", d.where);
}

void XpuBackend::synchronize(int index) {
  const XpuDevice& d = device(index);
  refuse_while_recording(d, "a wait for the device");
  cl_check(clFinish(d.queue.get()), "clFinish", d.where);
}

std::unique_ptr<DeviceGraph> XpuBackend::capture(int index, const std::function<void()>& work) {
  // Buffers allocated while recording come from the graphs' pool (block_cache.h): a replay writes them again.
  XpuDevice& d = device(index);
  check(blocks_.set_capturing(index, true), d.where, ": a device graph is already being captured");
  try {
    std::unique_ptr<DeviceGraph> graph = record(d, work);
    blocks_.set_capturing(index, false);
    return graph;
  } catch (...) {
    blocks_.set_capturing(index, false);
    throw;
  }
}

bool XpuBackend::supports_dtype(int index, DType dtype) {
  if (dtype == DType::bfloat16) return device(index).capabilities.bf16;
  return dtype == DType::float32 || dtype == DType::float16;
}

XpuBackend& xpu_backend() {
  // Never destroyed: at exit, OpenCL drivers may be torn down before static destructors run.
  static XpuBackend* backend = new XpuBackend(SelectionEnv::from_environment());
  return *backend;
}

}  // namespace tfm::xpu

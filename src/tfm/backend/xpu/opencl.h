// Checked OpenCL calls for the xpu backend: status codes turned into tfm::Error, owners for OpenCL objects,
// and typed info queries. CL_TARGET_OPENCL_VERSION comes from the build (300).
#pragma once

#include <CL/cl.h>

#include <string>
#include <string_view>
#include <utility>

namespace tfm::xpu {

// "CL_OUT_OF_RESOURCES"; "CL status -9999" for a code the headers do not name.
std::string cl_status_name(cl_int status);

// Throws tfm::Error "<where>: <call> failed with CL_OUT_OF_RESOURCES (-5)" unless status is CL_SUCCESS.
void cl_check(cl_int status, std::string_view call, std::string_view where = {});

// Owns one reference to an OpenCL object and releases it once.
template <typename T, cl_int (*Release)(T)>
class ClHandle {
 public:
  ClHandle() = default;
  explicit ClHandle(T handle) : handle_(handle) {}
  ClHandle(ClHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  ClHandle& operator=(ClHandle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  ClHandle(const ClHandle&) = delete;
  ClHandle& operator=(const ClHandle&) = delete;
  ~ClHandle() { reset(); }

  T get() const { return handle_; }

 private:
  // A release can fail only for an invalid handle, which an owner never holds; a destructor cannot report it.
  void reset() {
    if (handle_) Release(handle_);
    handle_ = nullptr;
  }
  T handle_ = nullptr;
};

using ClContext = ClHandle<cl_context, clReleaseContext>;
using ClQueue = ClHandle<cl_command_queue, clReleaseCommandQueue>;
using ClProgram = ClHandle<cl_program, clReleaseProgram>;
using ClKernel = ClHandle<cl_kernel, clReleaseKernel>;
using ClBuffer = ClHandle<cl_mem, clReleaseMemObject>;

// String queries, without the terminating NUL and trailing spaces some drivers add. `what` names the
// parameter in errors ("CL_DEVICE_NAME").
std::string platform_string(cl_platform_id platform, cl_platform_info param, std::string_view what);
std::string device_string(cl_device_id device, cl_device_info param, std::string_view what);

// A fixed-size device query (cl_ulong, cl_bool, cl_device_type, a struct).
template <typename T>
T device_value(cl_device_id device, cl_device_info param, std::string_view what) {
  T value{};
  cl_check(clGetDeviceInfo(device, param, sizeof(T), &value, nullptr),
           "clGetDeviceInfo(" + std::string(what) + ")");
  return value;
}

// Whether the space-separated CL_DEVICE_EXTENSIONS list has `name`.
bool has_extension(cl_device_id device, std::string_view name);

}  // namespace tfm::xpu

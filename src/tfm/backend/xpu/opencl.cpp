#include "tfm/backend/xpu/opencl.h"

#include <CL/cl_ext.h>

#include <vector>

#include "tfm/core/error.h"

namespace tfm::xpu {
namespace {

std::string trimmed(std::vector<char> bytes) {
  std::string s(bytes.begin(), bytes.end());
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::string cl_status_name(cl_int status) {
  switch (status) {
#define TFM_CL_STATUS(name) \
  case name:                \
    return #name;
    TFM_CL_STATUS(CL_SUCCESS)
    TFM_CL_STATUS(CL_DEVICE_NOT_FOUND)
    TFM_CL_STATUS(CL_DEVICE_NOT_AVAILABLE)
    TFM_CL_STATUS(CL_COMPILER_NOT_AVAILABLE)
    TFM_CL_STATUS(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    TFM_CL_STATUS(CL_OUT_OF_RESOURCES)
    TFM_CL_STATUS(CL_OUT_OF_HOST_MEMORY)
    TFM_CL_STATUS(CL_PROFILING_INFO_NOT_AVAILABLE)
    TFM_CL_STATUS(CL_MEM_COPY_OVERLAP)
    TFM_CL_STATUS(CL_IMAGE_FORMAT_MISMATCH)
    TFM_CL_STATUS(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    TFM_CL_STATUS(CL_BUILD_PROGRAM_FAILURE)
    TFM_CL_STATUS(CL_MAP_FAILURE)
    TFM_CL_STATUS(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    TFM_CL_STATUS(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    TFM_CL_STATUS(CL_COMPILE_PROGRAM_FAILURE)
    TFM_CL_STATUS(CL_LINKER_NOT_AVAILABLE)
    TFM_CL_STATUS(CL_LINK_PROGRAM_FAILURE)
    TFM_CL_STATUS(CL_DEVICE_PARTITION_FAILED)
    TFM_CL_STATUS(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    TFM_CL_STATUS(CL_INVALID_VALUE)
    TFM_CL_STATUS(CL_INVALID_DEVICE_TYPE)
    TFM_CL_STATUS(CL_INVALID_PLATFORM)
    TFM_CL_STATUS(CL_INVALID_DEVICE)
    TFM_CL_STATUS(CL_INVALID_CONTEXT)
    TFM_CL_STATUS(CL_INVALID_QUEUE_PROPERTIES)
    TFM_CL_STATUS(CL_INVALID_COMMAND_QUEUE)
    TFM_CL_STATUS(CL_INVALID_HOST_PTR)
    TFM_CL_STATUS(CL_INVALID_MEM_OBJECT)
    TFM_CL_STATUS(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    TFM_CL_STATUS(CL_INVALID_IMAGE_SIZE)
    TFM_CL_STATUS(CL_INVALID_SAMPLER)
    TFM_CL_STATUS(CL_INVALID_BINARY)
    TFM_CL_STATUS(CL_INVALID_BUILD_OPTIONS)
    TFM_CL_STATUS(CL_INVALID_PROGRAM)
    TFM_CL_STATUS(CL_INVALID_PROGRAM_EXECUTABLE)
    TFM_CL_STATUS(CL_INVALID_KERNEL_NAME)
    TFM_CL_STATUS(CL_INVALID_KERNEL_DEFINITION)
    TFM_CL_STATUS(CL_INVALID_KERNEL)
    TFM_CL_STATUS(CL_INVALID_ARG_INDEX)
    TFM_CL_STATUS(CL_INVALID_ARG_VALUE)
    TFM_CL_STATUS(CL_INVALID_ARG_SIZE)
    TFM_CL_STATUS(CL_INVALID_KERNEL_ARGS)
    TFM_CL_STATUS(CL_INVALID_WORK_DIMENSION)
    TFM_CL_STATUS(CL_INVALID_WORK_GROUP_SIZE)
    TFM_CL_STATUS(CL_INVALID_WORK_ITEM_SIZE)
    TFM_CL_STATUS(CL_INVALID_GLOBAL_OFFSET)
    TFM_CL_STATUS(CL_INVALID_EVENT_WAIT_LIST)
    TFM_CL_STATUS(CL_INVALID_EVENT)
    TFM_CL_STATUS(CL_INVALID_OPERATION)
    TFM_CL_STATUS(CL_INVALID_GL_OBJECT)
    TFM_CL_STATUS(CL_INVALID_BUFFER_SIZE)
    TFM_CL_STATUS(CL_INVALID_MIP_LEVEL)
    TFM_CL_STATUS(CL_INVALID_GLOBAL_WORK_SIZE)
    TFM_CL_STATUS(CL_INVALID_PROPERTY)
    TFM_CL_STATUS(CL_INVALID_IMAGE_DESCRIPTOR)
    TFM_CL_STATUS(CL_INVALID_COMPILER_OPTIONS)
    TFM_CL_STATUS(CL_INVALID_LINKER_OPTIONS)
    TFM_CL_STATUS(CL_INVALID_DEVICE_PARTITION_COUNT)
    TFM_CL_STATUS(CL_INVALID_PIPE_SIZE)
    TFM_CL_STATUS(CL_INVALID_DEVICE_QUEUE)
    TFM_CL_STATUS(CL_INVALID_SPEC_ID)
    TFM_CL_STATUS(CL_MAX_SIZE_RESTRICTION_EXCEEDED)
    TFM_CL_STATUS(CL_PLATFORM_NOT_FOUND_KHR)
#undef TFM_CL_STATUS
  }
  return "CL status " + std::to_string(status);
}

void cl_check(cl_int status, std::string_view call, std::string_view where) {
  if (status == CL_SUCCESS) return;
  throw_error(where, where.empty() ? "" : ": ", call, " failed with ", cl_status_name(status), " (", status,
              ")");
}

std::string platform_string(cl_platform_id platform, cl_platform_info param, std::string_view what) {
  const std::string call = "clGetPlatformInfo(" + std::string(what) + ")";
  size_t size = 0;
  cl_check(clGetPlatformInfo(platform, param, 0, nullptr, &size), call);
  std::vector<char> bytes(size);
  cl_check(clGetPlatformInfo(platform, param, size, bytes.data(), nullptr), call);
  return trimmed(std::move(bytes));
}

std::string device_string(cl_device_id device, cl_device_info param, std::string_view what) {
  const std::string call = "clGetDeviceInfo(" + std::string(what) + ")";
  size_t size = 0;
  cl_check(clGetDeviceInfo(device, param, 0, nullptr, &size), call);
  std::vector<char> bytes(size);
  cl_check(clGetDeviceInfo(device, param, size, bytes.data(), nullptr), call);
  return trimmed(std::move(bytes));
}

bool has_extension(cl_device_id device, std::string_view name) {
  const std::string list = " " + device_string(device, CL_DEVICE_EXTENSIONS, "CL_DEVICE_EXTENSIONS") + " ";
  return list.find(" " + std::string(name) + " ") != std::string::npos;
}

}  // namespace tfm::xpu

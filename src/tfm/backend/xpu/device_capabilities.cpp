#include "tfm/backend/xpu/device_capabilities.h"

#include <CL/cl_ext.h>

#include <algorithm>

#include "tfm/backend/xpu/opencl.h"

namespace tfm::xpu {
namespace {

constexpr uint32_t kRevisionBits = (1u << 6) - 1;

std::vector<size_t> sub_group_sizes(cl_device_id device) {
  const std::string call = "clGetDeviceInfo(CL_DEVICE_SUB_GROUP_SIZES_INTEL)";
  size_t bytes = 0;
  cl_check(clGetDeviceInfo(device, CL_DEVICE_SUB_GROUP_SIZES_INTEL, 0, nullptr, &bytes), call);
  std::vector<size_t> sizes(bytes / sizeof(size_t));
  cl_check(clGetDeviceInfo(device, CL_DEVICE_SUB_GROUP_SIZES_INTEL, bytes, sizes.data(), nullptr), call);
  return sizes;
}

}  // namespace

bool DeviceCapabilities::offers_sub_group(size_t size) const {
  return std::find(sub_group_sizes.begin(), sub_group_sizes.end(), size) != sub_group_sizes.end();
}

int DeviceCapabilities::dpas_sub_group_size() const {
  if (!dpas) return 0;
  for (size_t size : sub_group_sizes)
    if (size == 8) return 8;
  return 16;
}

bool lists_extension(std::string_view extensions, std::string_view name) {
  for (size_t begin = 0; begin < extensions.size();) {
    size_t end = extensions.find(' ', begin);
    if (end == std::string_view::npos) end = extensions.size();
    if (extensions.substr(begin, end - begin) == name) return true;
    begin = end + 1;
  }
  return false;
}

bool has_dpas(const DeviceDescription& device) {
  if (device.platform_vendor.find("Intel") == std::string::npos) return false;
  if (lists_extension(device.extensions, "cl_intel_subgroup_matrix_multiply_accumulate")) return true;
  if (!device.ip_version) return false;
  const uint32_t ip = *device.ip_version & ~kRevisionBits;
  const bool xe_hpg_or_hpc = ip >= intel_ip_version(12, 55) && ip < intel_ip_version(12, 70);
  return xe_hpg_or_hpc || ip >= intel_ip_version(20, 0);
}

DeviceCapabilities read_capabilities(cl_platform_id platform, cl_device_id device) {
  DeviceDescription description;
  description.platform_vendor = platform_string(platform, CL_PLATFORM_VENDOR, "CL_PLATFORM_VENDOR");
  description.extensions = device_string(device, CL_DEVICE_EXTENSIONS, "CL_DEVICE_EXTENSIONS");
  const auto lists = [&](std::string_view name) { return lists_extension(description.extensions, name); };
  if (lists("cl_intel_device_attribute_query"))
    description.ip_version =
        device_value<cl_uint>(device, CL_DEVICE_IP_VERSION_INTEL, "CL_DEVICE_IP_VERSION_INTEL");

  DeviceCapabilities c;
  c.eu_count = static_cast<int>(
      device_value<cl_uint>(device, CL_DEVICE_MAX_COMPUTE_UNITS, "CL_DEVICE_MAX_COMPUTE_UNITS"));
  if (lists("cl_intel_required_subgroup_size")) c.sub_group_sizes = sub_group_sizes(device);
  c.intel_subgroups = lists("cl_intel_subgroups") && lists("cl_intel_subgroups_short");
  c.fp16 = lists("cl_khr_fp16");
  c.bf16 = true;
  c.bf16_conversions = lists("cl_intel_bfloat16_conversions");
  c.dpas = has_dpas(description);
  c.max_work_group_size =
      device_value<size_t>(device, CL_DEVICE_MAX_WORK_GROUP_SIZE, "CL_DEVICE_MAX_WORK_GROUP_SIZE");
  c.unified_memory = device_value<cl_bool>(device, CL_DEVICE_HOST_UNIFIED_MEMORY,
                                           "CL_DEVICE_HOST_UNIFIED_MEMORY") != CL_FALSE;
  c.driver_version = device_string(device, CL_DRIVER_VERSION, "CL_DRIVER_VERSION");
  return c;
}

}  // namespace tfm::xpu

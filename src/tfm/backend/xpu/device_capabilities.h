// What one xpu device offers the kernels, read once when the device is discovered: which kernel variants can
// run on it (Intel sub-groups, DPAS), and what `tfm devices --json` reports. The struct and the
// classification rules use no OpenCL types, so that the rules are testable on described devices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct _cl_platform_id;
struct _cl_device_id;

namespace tfm::xpu {

struct DeviceCapabilities {
  int eu_count = 0;  // CL_DEVICE_MAX_COMPUTE_UNITS: execution units on Intel GPUs, cores on PoCL
  // CL_DEVICE_SUB_GROUP_SIZES_INTEL where the device has cl_intel_required_subgroup_size, else empty: the
  // sizes an intel_reqd_sub_group_size attribute may ask for.
  std::vector<size_t> sub_group_sizes;
  // cl_intel_subgroups and cl_intel_subgroups_short (which Intel's drivers list together): sub-group
  // reductions and block reads of 32- and 16-bit elements
  bool intel_subgroups = false;
  bool fp16 = false;  // cl_khr_fp16: arithmetic in half
  // bfloat16 tensors compute here. torch.xpu.is_bf16_supported() is true on every xpu device by default
  // (including_emulation=True); only with including_emulation=False does it ask for hardware conversions
  // (has_bfloat16_conversions, which is cl_intel_bfloat16_conversions). tfm's kernels store bfloat16 as the
  // top half of a float and compute in float32 on every device, which is that emulation: the same answer.
  bool bf16 = false;
  bool bf16_conversions = false;   // cl_intel_bfloat16_conversions: conversions in hardware
  bool dpas = false;               // DPAS (XMX) matrix instructions run correctly (has_dpas below)
  size_t max_work_group_size = 0;  // CL_DEVICE_MAX_WORK_GROUP_SIZE
  bool unified_memory = false;     // CL_DEVICE_HOST_UNIFIED_MEMORY: shares the host's memory (an iGPU)
  std::string driver_version;      // CL_DRIVER_VERSION

  // The sub-group size the DPAS kernels are built for: 8 where the device offers it (Xe-HPG executes DPAS
  // at SIMD8), else 16 (Xe-HPC and later have no SIMD8). 0 without DPAS.
  int dpas_sub_group_size() const;
  // Whether a kernel may require sub-groups of `size` lanes here.
  bool offers_sub_group(size_t size) const;
  // Whether the Intel sub-group kernels (block reads, reductions) run here at `size` lanes.
  bool runs_intel_subgroups(size_t size) const { return intel_subgroups && offers_sub_group(size); }
};

// The inputs of the classification, as the driver reports them.
struct DeviceDescription {
  std::string platform_vendor;  // CL_PLATFORM_VENDOR
  std::string extensions;       // CL_DEVICE_EXTENSIONS, space separated
  // CL_DEVICE_IP_VERSION_INTEL where the device has cl_intel_device_attribute_query.
  std::optional<uint32_t> ip_version;
};

// Intel's graphics IP version as drivers encode it (architecture.release.revision, the form ocloc's -device
// also takes): 10 bits of architecture, 8 of release, 8 reserved and 6 of revision. Not CL_MAKE_VERSION.
constexpr uint32_t intel_ip_version(uint32_t architecture, uint32_t release, uint32_t revision = 0) {
  return architecture << 22 | release << 14 | revision;
}

// Whether the space-separated `extensions` list has `name`.
bool lists_extension(std::string_view extensions, std::string_view name);

// DPAS runs only on Intel's driver for Xe-HPG (12.55, Arc / Flex) and Xe-HPC (12.60, Max) class devices and
// Xe2 (20.x) on: those listing cl_intel_subgroup_matrix_multiply_accumulate, or, since Debian's 22.43 driver
// does not list it, those whose IP version says so. Xe-LP (12.0 tgllp, 12.10 dg1) compiles DPAS into an
// invalid instruction, and Xe-LPG (12.70 to 12.74, Meteor / Arrow Lake) has no XMX unless the driver says so
// through the extension.
bool has_dpas(const DeviceDescription& device);

// The capabilities of an OpenCL device of `platform` (OpenCL's cl_platform_id and cl_device_id, declared here
// by their struct names to keep OpenCL's headers out of this one).
DeviceCapabilities read_capabilities(_cl_platform_id* platform, _cl_device_id* device);

}  // namespace tfm::xpu

// DeviceCapabilities: the DPAS rule on described devices (no OpenCL), and the values read from the test
// platform's devices against clGetDeviceInfo asked directly.
#include "tfm/backend/xpu/device_capabilities.h"

#include <gtest/gtest.h>

#include <CL/cl_ext.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "test_platform.h"
#include "tfm/backend/xpu/xpu_backend.h"

namespace tfm::xpu {
namespace {

constexpr const char* kIntel = "Intel(R) Corporation";
constexpr const char* kDpasExtension = "cl_intel_subgroup_matrix_multiply_accumulate";

DeviceDescription intel_device(std::optional<uint32_t> ip, std::string extensions = "cl_intel_subgroups") {
  return {kIntel, std::move(extensions), ip};
}

TEST(DeviceCapabilities, DpasByIpVersionOnIntelsDriver) {
  EXPECT_FALSE(has_dpas(intel_device(intel_ip_version(12, 0, 0))));   // tgllp: compiles, invalid ISA
  EXPECT_FALSE(has_dpas(intel_device(intel_ip_version(12, 10, 0))));  // dg1
  EXPECT_TRUE(has_dpas(intel_device(intel_ip_version(12, 55, 8))));   // dg2 / acm-g10
  EXPECT_TRUE(has_dpas(intel_device(intel_ip_version(12, 56, 5))));   // acm-g11
  EXPECT_TRUE(has_dpas(intel_device(intel_ip_version(12, 60, 7))));   // pvc
  EXPECT_FALSE(has_dpas(intel_device(intel_ip_version(12, 70, 4))));  // Meteor Lake: no XMX
  EXPECT_TRUE(has_dpas(intel_device(intel_ip_version(20, 1, 0))));    // Battlemage
  EXPECT_FALSE(has_dpas(intel_device(std::nullopt)));                 // no IP query, no extension
}

TEST(DeviceCapabilities, DpasByExtensionOnlyOnIntelsPlatform) {
  EXPECT_TRUE(has_dpas(intel_device(std::nullopt, std::string("cl_khr_fp16 ") + kDpasExtension)));
  EXPECT_TRUE(has_dpas(intel_device(intel_ip_version(12, 74, 0), kDpasExtension)));  // Arrow Lake H
  EXPECT_FALSE(has_dpas(intel_device(std::nullopt, std::string(kDpasExtension) + "_tensor_float32")));
  EXPECT_FALSE(has_dpas({"NVIDIA Corporation", kDpasExtension, std::nullopt}));
  EXPECT_FALSE(has_dpas({"The pocl project", "cl_khr_fp64", intel_ip_version(12, 55, 8)}));
}

TEST(DeviceCapabilities, ExtensionListsMatchWholeNames) {
  EXPECT_TRUE(lists_extension("cl_khr_fp16 cl_intel_subgroups", "cl_intel_subgroups"));
  EXPECT_TRUE(lists_extension("cl_khr_fp16 cl_intel_subgroups ", "cl_khr_fp16"));
  EXPECT_FALSE(lists_extension("cl_intel_subgroups_short", "cl_intel_subgroups"));
  EXPECT_FALSE(lists_extension("", "cl_khr_fp16"));
}

TEST(DeviceCapabilities, DpasSubGroupSizeIsEightWhereOffered) {
  DeviceCapabilities c;
  c.sub_group_sizes = {8, 16, 32};
  EXPECT_EQ(c.dpas_sub_group_size(), 0);
  c.dpas = true;
  EXPECT_EQ(c.dpas_sub_group_size(), 8);  // dg2
  c.sub_group_sizes = {16, 32};
  EXPECT_EQ(c.dpas_sub_group_size(), 16);  // pvc
}

// Each test-platform device's capabilities, against the OpenCL queries made here.
TEST(DeviceCapabilities, ReadFromTheTestPlatformsDevices) {
  SelectionEnv env;
  env.platform = test_platform();
  XpuBackend backend(env);
  if (backend.device_count() == 0) GTEST_SKIP() << "no OpenCL device on platform '" << test_platform() << "'";
  for (int i = 0; i < backend.device_count(); ++i) {
    const XpuDevice& d = backend.device(i);
    size_t size = 0;
    clGetDeviceInfo(d.id, CL_DEVICE_EXTENSIONS, 0, nullptr, &size);
    std::string extensions(size, '\0');
    clGetDeviceInfo(d.id, CL_DEVICE_EXTENSIONS, size, extensions.data(), nullptr);
    std::vector<std::string> names;
    std::istringstream words(extensions.c_str());
    for (std::string w; words >> w;) names.push_back(w);
    const auto listed = [&](const std::string& name) {
      return std::find(names.begin(), names.end(), name) != names.end();
    };
    cl_uint units = 0;
    size_t group = 0;
    cl_bool unified = CL_FALSE;
    clGetDeviceInfo(d.id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr);
    clGetDeviceInfo(d.id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof group, &group, nullptr);
    clGetDeviceInfo(d.id, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, nullptr);
    std::vector<size_t> sub_groups;
    if (listed("cl_intel_required_subgroup_size")) {
      clGetDeviceInfo(d.id, CL_DEVICE_SUB_GROUP_SIZES_INTEL, 0, nullptr, &size);
      sub_groups.resize(size / sizeof(size_t));
      clGetDeviceInfo(d.id, CL_DEVICE_SUB_GROUP_SIZES_INTEL, size, sub_groups.data(), nullptr);
    }
    clGetDeviceInfo(d.id, CL_DRIVER_VERSION, 0, nullptr, &size);
    std::string driver(size, '\0');
    clGetDeviceInfo(d.id, CL_DRIVER_VERSION, size, driver.data(), nullptr);

    const DeviceCapabilities& c = d.capabilities;
    EXPECT_EQ(c.eu_count, static_cast<int>(units));
    EXPECT_EQ(c.max_work_group_size, group);
    EXPECT_EQ(c.unified_memory, unified == CL_TRUE);
    EXPECT_EQ(c.sub_group_sizes, sub_groups);
    EXPECT_EQ(c.fp16, listed("cl_khr_fp16"));
    EXPECT_EQ(c.intel_subgroups, listed("cl_intel_subgroups") && listed("cl_intel_subgroups_short"));
    EXPECT_EQ(c.bf16_conversions, listed("cl_intel_bfloat16_conversions"));
    EXPECT_TRUE(c.bf16);  // emulated where not in hardware, as torch.xpu counts it
    EXPECT_EQ(c.driver_version, std::string(driver.c_str()));
    if (!listed(kDpasExtension) && !listed("cl_intel_device_attribute_query")) {
      EXPECT_FALSE(c.dpas);
    }
    ASSERT_TRUE(backend.info(i).xpu_capabilities.has_value());
    EXPECT_EQ(backend.info(i).xpu_capabilities->eu_count, c.eu_count);
    EXPECT_EQ(backend.supports_dtype(i, DType::bfloat16), c.bf16);
  }
}

TEST(DeviceCapabilities, IsBf16SupportedAsksTheDevice) {
  const std::optional<Device> device = seam_test_device();
  if (!device) GTEST_SKIP() << "no OpenCL device on platform '" << test_platform() << "'";
  EXPECT_EQ(is_bf16_supported(*device), xpu_backend().device(device->index).capabilities.bf16);
  EXPECT_FALSE(is_bf16_supported(Device{DeviceType::xpu, xpu_backend().device_count()}));
}

}  // namespace
}  // namespace tfm::xpu

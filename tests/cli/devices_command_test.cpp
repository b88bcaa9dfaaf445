// `tfm devices`: with the xpu backend, each xpu device's capabilities in the JSON form and a summary in the
// text form, here on the OpenCL test platform (PoCL). The values themselves are checked against OpenCL in
// tests/xpu/device_capabilities_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "../xpu/test_platform.h"
#include "support/shell.h"
#include "tfm/io/json.h"

namespace {

using tfm::test_support::shell;

std::string devices_command(const std::string& args) {
  return "TFM_XPU_PLATFORM='" + tfm::xpu::test_platform() + "' " + TFM_BINARY + " devices " + args;
}

TEST(DevicesCommand, JsonHasEachXpuDevicesCapabilities) {
#ifndef TFM_HAVE_XPU
  GTEST_SKIP() << "built without the xpu backend";
#endif
  const auto r = shell(devices_command("--json 2>/dev/null"));
  ASSERT_EQ(r.status, 0) << r.out;
  const tfm::json::Value devices = tfm::json::parse(r.out);
  int xpu_devices = 0;
  for (const auto& d : devices.as_array()) {
    for (const char* field : {"device", "name", "total_memory", "free_memory", "driver_version"})
      ASSERT_TRUE(d.contains(field)) << field << " in " << r.out;
    if (d.at("device").as_string().rfind("xpu:", 0) != 0) {
      EXPECT_FALSE(d.contains("eu_count")) << d.at("device").as_string();
      continue;
    }
    ++xpu_devices;
    EXPECT_GT(d.at("eu_count").as_int(), 0);
    EXPECT_GT(d.at("max_work_group_size").as_int(), 0);
    EXPECT_TRUE(d.at("sub_group_sizes").is_array());
    for (const char* flag : {"fp16", "bf16", "bf16_conversions", "dpas", "intel_subgroups", "unified_memory"})
      EXPECT_TRUE(d.at(flag).is_bool()) << flag;
    EXPECT_NE(d.at("driver_version").as_string().find("driver "), std::string::npos);
  }
  if (xpu_devices == 0) GTEST_SKIP() << "no OpenCL device on platform '" << tfm::xpu::test_platform() << "'";
  const auto text = shell(devices_command("2>/dev/null"));
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find(" EUs"), std::string::npos) << text.out;
}

}  // namespace

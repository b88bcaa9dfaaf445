// The OpenCL platform the xpu tests run on: PoCL (a CPU OpenCL, installed by scripts/setup) unless
// TFM_XPU_PLATFORM names another ("NVIDIA CUDA" on the GPU machine, "Intel" on an Intel GPU).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "tfm/backend/backend.h"

namespace tfm::xpu {

inline std::string test_platform() {
  const char* p = std::getenv("TFM_XPU_PLATFORM");
  return p && *p ? p : "Portable Computing Language";
}

// xpu:0 of the process-wide backend, which ops dispatch to, on the test platform; nullopt when it has no
// device. That backend reads the environment once, so the variable is set before its first use.
inline std::optional<Device> seam_test_device() {
  setenv("TFM_XPU_PLATFORM", test_platform().c_str(), 0);
  Backend* backend = find_backend(DeviceType::xpu);
  if (!backend || backend->device_count() == 0) return std::nullopt;
  return Device{DeviceType::xpu, 0};
}

// A fixture whose tests run on xpu:0 of the test platform (device_), skipped where it has no device.
template <typename Base = testing::Test>
class OnTestDevice : public Base {
 protected:
  void SetUp() override {
    const std::optional<Device> d = seam_test_device();
    if (!d) GTEST_SKIP() << "no OpenCL device on platform '" << test_platform() << "'";
    device_ = *d;
  }
  Device device_;
};

}  // namespace tfm::xpu

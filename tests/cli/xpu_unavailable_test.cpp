// `tfm` where the xpu backend finds no device or cannot choose one: no OpenCL platform at all (the ICD loader
// pointed at an empty vendors directory) and a malformed ZE_AFFINITY_MASK. The cpu stays usable, and a
// request for xpu is a one-line error saying why, never a crash.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "support/shell.h"

namespace {

using tfm::test_support::shell;

const std::string kModel = std::string(TFM_SOURCE_DIR) + "/tests/fixtures/models/llama_gqa";
const std::string kGenerateOnXpu =
    " generate --model " + kModel + " --ids 1,17,42 --max-new-tokens 2 --dtype float32 --device xpu";

class XpuUnavailable : public testing::Test {
 protected:
  void SetUp() override {
#ifndef TFM_HAVE_XPU
    GTEST_SKIP() << "built without the xpu backend";
#endif
    vendors_ = testing::TempDir() + "tfm_no_icd_XXXXXX";
    ASSERT_NE(mkdtemp(vendors_.data()), nullptr);
    no_platform_ = "OCL_ICD_VENDORS=" + vendors_ + " ";
  }
  void TearDown() override {
    if (!no_platform_.empty()) rmdir(vendors_.c_str());
  }
  // tfm with `env` before it, stderr joined to stdout.
  static tfm::test_support::ShellResult tfm(const std::string& env, const std::string& args) {
    return shell("env -u TFM_XPU_PLATFORM -u ZE_AFFINITY_MASK " + env + TFM_BINARY + " " + args + " 2>&1");
  }
  std::string vendors_;      // an empty directory of OpenCL vendors
  std::string no_platform_;  // the variable that points the ICD loader at it
};

TEST_F(XpuUnavailable, WithoutAnyOpenClPlatformDevicesListsTheCpu) {
  const auto r = tfm(no_platform_, "devices");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(r.out.starts_with("cpu\t")) << r.out;
  EXPECT_EQ(r.out.find("xpu"), std::string::npos) << r.out;
}

TEST_F(XpuUnavailable, WithoutAnyOpenClPlatformXpuIsAnErrorSayingSo) {
  const auto r = tfm(no_platform_, kGenerateOnXpu);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(
      r.out.find("device 'xpu' is not available (no OpenCL platform is installed: the OpenCL ICD loader "
                 "found none, and Intel GPUs need intel-opencl-icd); available devices: cpu"),
      std::string::npos)
      << r.out;
}

TEST_F(XpuUnavailable, AMalformedAffinityMaskIsAnErrorNamingIt) {
  const auto r = tfm("ZE_AFFINITY_MASK=0-1 ", kGenerateOnXpu);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("ZE_AFFINITY_MASK '0-1'"), std::string::npos) << r.out;
}

}  // namespace

// The installed package as another project uses it: this build installed into a fresh prefix, then
// examples/quickstart.cpp built against it from outside the source tree, through find_package(tfm) and
// through pkg-config, and run on the installed demo model: it prints what the in-tree example prints
// (test_cli's Cli.QuickstartExampleMirrorsTheGuide).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/demo_model.h"
#include "support/shell.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;
using test_support::shell;

std::string single_quoted(const fs::path& p) {
  return "'" + p.string() + "'";
}

class Install : public testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(work_);
    fs::create_directories(work_);
    const auto r = shell(std::string(TFM_CMAKE) + " --install " + single_quoted(TFM_BUILD_DIR) +
                         " --prefix " + single_quoted(prefix_) + " 2>&1");
    ASSERT_EQ(r.status, 0) << r.out;
  }
  void TearDown() override { fs::remove_all(work_); }

  // Runs the consumer's quickstart on the installed demo model; its standard output.
  std::string run_quickstart(const fs::path& program) {
    const auto r =
        shell(single_quoted(program) + " " + single_quoted(prefix_ / "share/tfm/models/demo") + " 2>&1");
    EXPECT_EQ(r.status, 0) << r.out;
    return r.out;
  }

  // ctest runs each case as a process of its own, at the same time as others: each has its own folder.
  const fs::path work_ = fs::path(testing::TempDir()) / ("tfm_install_test_" + std::to_string(getpid()));
  const fs::path prefix_ = work_ / "prefix";
  const std::string quickstart_ = TFM_SOURCE_DIR "/examples/quickstart.cpp";
};

TEST_F(Install, CMakePackageBuildsTheQuickstart) {
  const fs::path project = work_ / "consumer";
  fs::create_directories(project);
  std::ofstream(project / "CMakeLists.txt") << "cmake_minimum_required(VERSION 3.25)\n"
                                               "project(consumer CXX)\n"
                                               "find_package(tfm 0.1 REQUIRED)\n"
                                               "add_executable(quickstart "
                                            << quickstart_
                                            << ")\n"
                                               "target_link_libraries(quickstart PRIVATE tfm::tfm)\n";
  const std::string cmake = TFM_CMAKE;
  const auto configure =
      shell(cmake + " -S " + single_quoted(project) + " -B " + single_quoted(project / "build") +
            " -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=" + TFM_CXX +
            " -DCMAKE_PREFIX_PATH=" + single_quoted(prefix_) + " 2>&1");
  ASSERT_EQ(configure.status, 0) << configure.out;
  const auto build = shell(cmake + " --build " + single_quoted(project / "build") + " 2>&1");
  ASSERT_EQ(build.status, 0) << build.out;
  EXPECT_EQ(run_quickstart(project / "build/quickstart"),
            test_support::demo_reference_text("bfloat16") + "\n");
}

TEST_F(Install, PkgConfigBuildsTheQuickstart) {
  const fs::path program = work_ / "quickstart";
  const std::string pkg_config =
      "PKG_CONFIG_PATH=" + single_quoted(prefix_ / TFM_INSTALL_LIBDIR / "pkgconfig") + " pkg-config";
  const auto build = shell(std::string(TFM_CXX) + " -std=c++20 -O2 " + quickstart_ + " -o " +
                           single_quoted(program) + " $(" + pkg_config + " --cflags --libs tfm) 2>&1");
  ASSERT_EQ(build.status, 0) << build.out;
  EXPECT_EQ(run_quickstart(program), test_support::demo_reference_text("bfloat16") + "\n");
}

}  // namespace
}  // namespace tfm

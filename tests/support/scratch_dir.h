// Shared by the test programs: a fresh directory for one test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace tfm::testing {

// A fresh directory for one test, removed with it; under `base` when given (the fuzz test uses memory).
class ScratchDir {
 public:
  explicit ScratchDir(std::filesystem::path base = std::filesystem::temp_directory_path()) {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = base / ("tfm_" + std::string(test->test_suite_name()) + "_" + test->name() + "_" +
                    std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace tfm::testing

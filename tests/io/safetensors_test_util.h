// Shared by the safetensors tests: fixture paths, scratch files, hand-made (possibly broken) files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace tfm::testing {

inline std::string safetensors_fixture(const std::string& name) {
  return std::string(TFM_SOURCE_DIR) + "/tests/fixtures/safetensors/" + name;
}

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

// Where the interop tests leave the files tfm wrote: $TFM_SAFETENSORS_EXPORT when set, for
// `make_safetensors.py check DIR` to load them in Python; else the test's scratch directory.
inline std::string export_dir(const ScratchDir& scratch) {
  const char* dir = std::getenv("TFM_SAFETENSORS_EXPORT");
  if (!dir) return scratch.path().string();
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The 8-byte little-endian length the format starts with.
inline std::string length_prefix(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A file made of a header (its true length in front) and data.
inline std::string safetensors_bytes(const std::string& header, const std::string& data = "") {
  return length_prefix(header.size()) + header + data;
}

}  // namespace tfm::testing

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

#include "support/scratch_dir.h"

namespace tfm::testing {

inline std::string safetensors_fixture(const std::string& name) {
  return std::string(TFM_SOURCE_DIR) + "/tests/fixtures/safetensors/" + name;
}

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

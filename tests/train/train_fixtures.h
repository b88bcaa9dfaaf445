// Shared by the train tests: the samples and references of tests/fixtures/train, the shipped tokenizers
// loaded once, and scratch training files.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "support/test_assets.h"
#include "tfm/io/json.h"
#include "tfm/tokenizer/tokenizer.h"

namespace tfm::testing {

inline std::string fixture(const std::string& name) {
  return TFM_SOURCE_DIR "/tests/fixtures/train/" + name;
}

// "qwen3" or "llama2", loaded on first use (Qwen3's tokenizer.json is 11 MB).
inline const tokenizer::Tokenizer& shipped(const std::string& name) {
  static std::map<std::string, tokenizer::Tokenizer> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end())
    it =
        loaded.emplace(name, tokenizer::AutoTokenizer::from_pretrained(test_support::shipped_tokenizer(name)))
            .first;
  return it->second;
}

// Writes `contents` to a file of the test's own and returns its path.
inline std::string scratch_file(const std::string& name, const std::string& contents) {
  const auto dir = std::filesystem::temp_directory_path() / "tfm_train_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

template <typename T>
std::vector<T> ints_of(const json::Value& list) {
  std::vector<T> out;
  for (const json::Value& v : list.as_array()) out.push_back(static_cast<T>(v.as_int()));
  return out;
}

}  // namespace tfm::testing

// Shared by the test programs: the real tokenizers of tests/assets, which the build unpacks into its own tree
// (TFM_TEST_ASSETS_DIR) because the repository stores them compressed.
#pragma once

#include <string>

namespace tfm::test_support {

// The folder of a tokenizer of tests/assets/tokenizers ("qwen3", "llama2"), ready to load.
inline std::string shipped_tokenizer(const std::string& name) {
  return std::string(TFM_TEST_ASSETS_DIR) + "/tokenizers/" + name;
}

}  // namespace tfm::test_support

// Shared by the test programs: a copy of a model folder in a temporary directory, for tests that damage a
// model (its config.json, the values of a tensor) without touching the fixture.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tfm/core/error.h"
#include "tfm/core/floats.h"
#include "tfm/io/json.h"

namespace tfm::test_support {

class ModelCopy {
 public:
  explicit ModelCopy(const std::string& from) {
    static int counter = 0;
    dir_ = (std::filesystem::temp_directory_path() /
            ("tfm_model_copy_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
               .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::copy(from, dir_, std::filesystem::copy_options::recursive);
  }
  ~ModelCopy() { std::filesystem::remove_all(dir_); }
  ModelCopy(const ModelCopy&) = delete;
  ModelCopy& operator=(const ModelCopy&) = delete;

  const std::string& dir() const { return dir_; }

  // Sets top-level keys of config.json.
  void edit_config(const json::Object& edits) const {
    const std::string path = dir_ + "/config.json";
    json::Value config = json::parse_file(path);
    for (const auto& [key, value] : edits) config.set(key, value);
    std::ofstream(path) << json::dump(config);
  }

  // Sets the first element of tensor `name` in model.safetensors to `value`, in the tensor's dtype.
  void set_first_element(const std::string& name, float value) const {
    const std::string path = dir_ + "/model.safetensors";
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    uint64_t header_size = 0;
    file.read(reinterpret_cast<char*>(&header_size), sizeof header_size);
    std::string header(header_size, '\0');
    file.read(header.data(), static_cast<std::streamsize>(header_size));
    const json::Value info = json::parse(header).at(name);
    const auto offset = static_cast<std::streamoff>(8 + header_size + info.at("data_offsets")[0].as_int());
    const std::string dtype = info.at("dtype").as_string();
    char bytes[4];
    size_t size = 4;
    if (dtype == "F32") {
      std::memcpy(bytes, &value, 4);
    } else {
      const uint16_t half = dtype == "BF16" ? float_to_bf16(value) : float_to_fp16(value);
      std::memcpy(bytes, &half, 2);
      size = 2;
    }
    file.seekp(offset);
    file.write(bytes, static_cast<std::streamsize>(size));
  }

 private:
  std::string dir_;
};

}  // namespace tfm::test_support

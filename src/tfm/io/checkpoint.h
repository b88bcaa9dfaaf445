// A model's weights as the Hub ships them: one model.safetensors, or shards listed by
// model.safetensors.index.json (Transformers' save_pretrained layout), seen as one set of named tensors.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/io/safetensors.h"

namespace tfm {

class Checkpoint {
 public:
  // Opens, in Transformers' order of preference, model.safetensors or the shards of
  // model.safetensors.index.json (every shard must exist and hold every name the index maps to it); or else,
  // where Transformers would fail, every *.safetensors in `dir` (a name in two files is an error). Tensors a
  // shard holds beyond those the index lists are not exposed, as Transformers loads what the index maps.
  static Checkpoint open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // Index order for an index (sorted, as Transformers writes it), else file by file in header order.
  std::vector<std::string> names() const;
  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  Tensor get(std::string_view name) const;              // zero-copy view; an absent name throws
  void read(std::string_view name, size_t begin, void* dst, size_t bytes) const;  // SafetensorsFile::read
  void release(std::string_view name, size_t begin = 0, size_t end = 0) const;  // SafetensorsFile::release
  // The path of the file that holds `name` (for error messages); an absent name throws.
  const std::string& file_of(std::string_view name) const;
  const std::vector<SafetensorsFile>& files() const { return files_; }

 private:
  struct Location {
    size_t file;
    size_t tensor;  // position in files_[file].tensors()
  };
  const Location& locate(std::string_view name) const;

  std::string dir_;
  std::vector<SafetensorsFile> files_;
  std::vector<std::string> names_;
  std::map<std::string, Location, std::less<>> locations_;
};

// Saves `tensors` as Transformers' save_pretrained does: split in the given order into shards of at most
// `max_shard_bytes` (a larger tensor gets a shard of its own), written as model-0000N-of-0000M.safetensors
// with model.safetensors.index.json ({"metadata": {"total_parameters", "total_size"}, "weight_map"}), or as
// one model.safetensors when a single shard holds everything. Weight files of an earlier save in `dir` that
// this save does not rewrite are removed, so the folder cannot mix two saves. Each file gets `metadata`
// (Transformers passes {"format": "pt"}).
void save_sharded(const std::string& dir, const std::vector<std::pair<std::string, Tensor>>& tensors,
                  size_t max_shard_bytes, const json::Object& metadata = {});

}  // namespace tfm

// The safetensors format: read (memory-mapped, zero copy, every header rule of the reference Rust library
// checked at open) and write (byte-for-byte the layout the Python library writes).
//
// A file is: 8 bytes little-endian header length n, n bytes of JSON header, then the data. The header maps
// each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data), plus
// an optional "__metadata__" object of strings. Tensors tile the data exactly, from 0, without gaps or
// overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/io/json.h"

namespace tfm {

struct TensorInfo {
  std::string name;
  DType dtype = DType::float32;
  Shape shape;
  size_t offset = 0;  // byte offset of the first element within the file (not within the data section)
  size_t nbytes = 0;
};

class SafetensorsFile {
 public:
  // Maps the file (privately: nothing written to the mapping reaches the file) and validates the whole
  // header; a bad file throws tfm::Error naming the file and, where one is at fault, the tensor.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  // In header order (the order the writer chose; the Python library sorts by dtype then name).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  // A CPU tensor viewing the mapped bytes (no copy; a write copies the page it lands on, in this process
  // only, so an optimizer may update weights that view the file). It keeps the mapping alive after this
  // object is gone. A tensor whose offset is not a multiple of its element size (never so in files the Python
  // library wrote) is copied to aligned memory instead. An absent name throws, naming the file.
  Tensor get(std::string_view name) const;
  // Copies bytes [begin, begin + bytes) of tensor `name` to `dst` by reading the file (pread), so that the
  // mapping's pages stay out of this process's memory; safe from several threads at once.
  void read(std::string_view name, size_t begin, void* dst, size_t bytes) const;
  // Done with bytes [begin, end) of the tensor (end 0: to its end): their pages leave this process's memory
  // but stay in the page cache, and a later read maps them again; views stay valid, but a page written
  // through one goes back to the file's bytes, so release only what no view writes.
  void release(std::string_view name, size_t begin = 0, size_t end = 0) const;
  // The "__metadata__" object (string values only); empty when the file has none.
  const json::Value& metadata() const { return metadata_; }

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<Mapping> mapping_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in tensors_
  json::Value metadata_;
};

// Writes `tensors` (CPU, contiguous, unique names) as one safetensors file, laid out as the Python library
// does: sorted by dtype (widest alignment first) then by name, "__metadata__" first, header padded with
// spaces to a multiple of 8. Metadata values must be strings; empty metadata writes no "__metadata__" (as
// Python's metadata=None). Written to a temporary name then renamed, so a reader that still maps an older
// file at `path` is unaffected.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const json::Object& metadata = {});

}  // namespace tfm

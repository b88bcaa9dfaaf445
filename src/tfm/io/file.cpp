#include "tfm/io/file.h"

#include <cstdio>
#include <memory>

#include "tfm/core/error.h"

namespace tfm::io {

std::string read_file(const std::string& path) {
  // stdio with one sized read: no stream buffer copy, which shows on an 11 MB tokenizer.json.
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  check(f != nullptr, "cannot read ", path);
  std::string bytes;
  if (std::fseek(f.get(), 0, SEEK_END) == 0) {
    const long size = std::ftell(f.get());
    std::rewind(f.get());
    if (size > 0) {
      bytes.resize(static_cast<size_t>(size));
      bytes.resize(std::fread(bytes.data(), 1, bytes.size(), f.get()));
    }
  }
  char chunk[1 << 16];  // what a pipe or a growing file holds beyond the size seen
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f.get())) > 0;) bytes.append(chunk, n);
  check(!std::ferror(f.get()), "cannot read ", path);
  return bytes;
}

}  // namespace tfm::io

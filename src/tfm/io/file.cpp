#include "tfm/io/file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
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

void write_file_atomically(const std::string& path, std::string_view bytes) {
  // The process id keeps two writers of the same path from sharing a temporary file.
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  FILE* out = std::fopen(temporary.c_str(), "wb");
  check(out != nullptr, "cannot write ", path, ": ", std::strerror(errno));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), out) == bytes.size();
  ok = (std::fflush(out) == 0) && ok;
  ok = (::fsync(::fileno(out)) == 0) && ok;  // the data reaches the disk before the name points at it
  ok = (std::fclose(out) == 0) && ok;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    throw_error("cannot write ", path, ": ", std::strerror(error));
  }
}

}  // namespace tfm::io

// SafetensorsFile::open over arbitrary bytes: a tfm::Error, or a file whose every tensor lies inside it (each
// is viewed and read at both ends; a view past the mapping faults).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "tfm/core/error.h"
#include "tfm/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // open() takes a path: an in-memory file keeps the disk out of every run.
  static const int fd = memfd_create("fuzz.safetensors", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) abort();
  try {
    const tfm::SafetensorsFile file = tfm::SafetensorsFile::open(path);
    for (const tfm::TensorInfo& t : file.tensors()) {
      if (t.nbytes == 0) continue;
      const tfm::Tensor view = file.get(t.name);
      const auto* bytes = static_cast<const volatile char*>(view.raw());
      char ends[2] = {bytes[0], bytes[t.nbytes - 1]};
      file.read(t.name, t.nbytes - 1, ends, 1);
    }
    (void)file.metadata();
  } catch (const tfm::Error&) {
  }
  return 0;
}

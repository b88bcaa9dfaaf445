// Host-to-device copy speed of copy_from_host as the weight loader uses it: from a fresh mapping of a file
// whose pages are in the page cache (written first), so that the copy also faults the pages in, into one
// device tensor, CHUNK_MIB per call (the loader's 64 MB in bf16); the median of REPEAT passes after a
// warm-up. bench/load_bench.cpp measures whole model loads.
//
//   copy_bench [DEVICE] [MIB] [CHUNK_MIB] [REPEAT]          defaults: cuda:0 4096 64 5
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"

int main(int argc, char** argv) try {
  const tfm::Device device = tfm::resolve_device(argc > 1 ? argv[1] : "cuda:0");
  const size_t bytes = (argc > 2 ? std::stoull(argv[2]) : 4096) << 20;
  const size_t chunk = (argc > 3 ? std::stoull(argv[3]) : 64) << 20;
  const int repeat = argc > 4 ? std::stoi(argv[4]) : 5;
  tfm::check(bytes > 0 && chunk > 0 && repeat > 0,
             "usage: copy_bench [DEVICE] [MIB] [CHUNK_MIB] [REPEAT], each number positive");

  const std::string path = (std::filesystem::temp_directory_path() / "tfm_copy_bench.bin").string();
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  tfm::check(fd >= 0, "cannot create ", path);
  unlink(path.c_str());  // gone when closed
  tfm::check(ftruncate(fd, static_cast<off_t>(bytes)) == 0, "cannot size ", path);
  {
    std::vector<char> block(size_t{1} << 20);
    for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>(i * 131);
    for (size_t at = 0; at < bytes; at += block.size()) {
      tfm::check(pwrite(fd, block.data(), std::min(block.size(), bytes - at), static_cast<off_t>(at)) > 0,
                 "cannot write ", path);
    }
  }

  const tfm::Tensor dst = tfm::empty({static_cast<int64_t>(bytes)}, tfm::DType::uint8, device);
  std::vector<double> seconds;
  for (int i = 0; i <= repeat; ++i) {
    void* mapped = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    tfm::check(mapped != MAP_FAILED, "cannot map ", path);
    const auto start = std::chrono::steady_clock::now();
    for (size_t at = 0; at < bytes; at += chunk) {
      const size_t n = std::min(chunk, bytes - at);
      tfm::copy_from_host(dst.narrow(static_cast<int64_t>(at), static_cast<int64_t>(n)),
                          static_cast<const char*>(mapped) + at);
    }
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    munmap(mapped, bytes);
    if (i > 0) seconds.push_back(took.count());  // the first pass also allocates the staging buffers
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  std::printf(
      "{\"device\": \"%s\", \"bytes\": %zu, \"chunk_bytes\": %zu, \"median_seconds\": %.4f, "
      "\"gb_per_s\": %.2f}\n",
      device.str().c_str(), bytes, chunk, median, static_cast<double>(bytes) / median / 1e9);
  close(fd);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "copy_bench: %s\n", e.what());
  return 1;
}

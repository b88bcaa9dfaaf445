// Host-to-device copy speed from a file whose pages are in the page cache (written first), into one device
// tensor, CHUNK_MIB per call, two ways: copy_from_host from a fresh mapping of the file (the copy also faults
// the pages in), and copy_from_reader reading the file (pread), as the weight loader moves a tensor stored in
// the model's dtype; the median of REPEAT passes after a warm-up each. bench/load_bench.cpp measures whole
// model loads.
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
  auto median_seconds = [&](const auto& copy_pass) {
    std::vector<double> seconds;
    for (int i = 0; i <= repeat; ++i) {
      const auto start = std::chrono::steady_clock::now();
      copy_pass();
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      if (i > 0) seconds.push_back(took.count());  // the first pass also allocates the staging buffers
    }
    std::sort(seconds.begin(), seconds.end());
    return seconds[seconds.size() / 2];
  };
  const double mapped_seconds = median_seconds([&] {
    void* mapped = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    tfm::check(mapped != MAP_FAILED, "cannot map ", path);
    for (size_t at = 0; at < bytes; at += chunk) {
      const size_t n = std::min(chunk, bytes - at);
      tfm::copy_from_host(dst.narrow(static_cast<int64_t>(at), static_cast<int64_t>(n)),
                          static_cast<const char*>(mapped) + at);
    }
    munmap(mapped, bytes);
  });
  const double read_seconds = median_seconds([&] {
    for (size_t at = 0; at < bytes; at += chunk) {
      const size_t n = std::min(chunk, bytes - at);
      tfm::copy_from_reader(dst.narrow(static_cast<int64_t>(at), static_cast<int64_t>(n)),
                            [&](void* out, size_t offset, size_t piece) {
                              tfm::check(pread(fd, out, piece, static_cast<off_t>(at + offset)) ==
                                             static_cast<ssize_t>(piece),
                                         "cannot read ", path);
                            });
    }
  });
  std::printf(
      "{\"device\": \"%s\", \"bytes\": %zu, \"chunk_bytes\": %zu, \"mapped_copy_gb_per_s\": %.2f, "
      "\"file_read_gb_per_s\": %.2f}\n",
      device.str().c_str(), bytes, chunk, static_cast<double>(bytes) / mapped_seconds / 1e9,
      static_cast<double>(bytes) / read_seconds / 1e9);
  close(fd);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "copy_bench: %s\n", e.what());
  return 1;
}

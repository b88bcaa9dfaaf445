// Model load time and peak host memory: CausalLM::from_pretrained of a model folder onto a device in a dtype,
// with the checkpoint's files read into the page cache first (so the figure is tfm's, not the disk's).
//
//   load_bench --model DIR --device cuda --dtype bfloat16 [--repeat 3]
//
// Prints one JSON object: the median load time, the checkpoint's bytes, and the process's peak resident
// memory above what it held before loading (VmHWM, reset through /proc/self/clear_refs, minus VmRSS then), and
// the file-backed part (pages of the mapped checkpoint) left after loading, as /proc/self/status reports them.
// Peer: bench/load_peer.py.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/model/causal_lm.h"

namespace {

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == "--" + name) return argv[i + 1];
  return fallback;
}

// A field of /proc/self/status in bytes ("VmHWM", "RssFile").
int64_t status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

// Reads every safetensors file once, so that loads are served from the page cache.
int64_t warm_page_cache(const std::string& dir) {
  int64_t bytes = 0;
  std::vector<char> buffer(64 << 20);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".safetensors") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) bytes += in.gcount();
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string model = arg(argc, argv, "model", "");
    tfm::check(!model.empty(), "usage: load_bench --model DIR --device D --dtype T [--repeat N]");
    const std::string device = arg(argc, argv, "device", "cuda");
    const std::string dtype = arg(argc, argv, "dtype", "bfloat16");
    const int repeat = std::max(1, std::stoi(arg(argc, argv, "repeat", "3")));
    const int64_t checkpoint_bytes = warm_page_cache(model);
    tfm::resolve_device(device);  // the device's runtime starts before the clock and the baseline
    std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM starts again from VmRSS
    const int64_t baseline = status_bytes("VmRSS");
    std::vector<double> seconds;
    int64_t peak_file = 0;
    for (int i = 0; i < repeat; ++i) {
      const auto start = std::chrono::steady_clock::now();
      tfm::CausalLM loaded =
          tfm::CausalLM::from_pretrained(model, {.dtype = dtype, .device = device, .progress = false});
      tfm::find_backend(loaded.device().type)->synchronize(loaded.device().index_or_zero());
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      peak_file = std::max(peak_file, status_bytes("RssFile"));
    }
    std::sort(seconds.begin(), seconds.end());
    tfm::json::Value out;
    out.set("peer", "tfm");
    out.set("device", device);
    out.set("dtype", dtype);
    out.set("load_seconds", seconds[seconds.size() / 2]);
    out.set("checkpoint_bytes", checkpoint_bytes);
    out.set("peak_rss_above_start_bytes", status_bytes("VmHWM") - baseline);
    out.set("file_backed_rss_after_load_bytes", peak_file);
    std::cout << tfm::json::dump(out) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

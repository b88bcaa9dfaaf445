// Tokenizer speed: load time of a model folder's tokenizer and single-thread encode throughput over the
// lines of a text file (MB/s and tokens/s). bench/tokenizer_bench_peer.py measures the Rust library on the
// same lines; docs/perf.md has the commands and numbers.
//   tokenizer_bench --model DIR --text FILE [--repeat N] [--loads N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tfm/io/file.h"
#include "tfm/tokenizer/tokenizer.h"
#include "tfm/tokenizer/tokenizer_json.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == "--" + name) return argv[i + 1];
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = arg(argc, argv, "model", "");
  const std::string text_path = arg(argc, argv, "text", "");
  const int repeat = std::stoi(arg(argc, argv, "repeat", "3"));
  const int loads = std::max(1, std::stoi(arg(argc, argv, "loads", "10")));
  if (model.empty() || text_path.empty()) {
    std::cerr << "usage: tokenizer_bench --model DIR --text FILE [--repeat N] [--loads N]\n";
    return 2;
  }
  try {
    std::vector<std::string> lines;
    size_t bytes = 0;
    {
      std::ifstream in(text_path, std::ios::binary);
      if (!in) throw std::runtime_error("cannot read " + text_path);
      for (std::string line; std::getline(in, line);)
        if (!line.empty()) {
          bytes += line.size();
          lines.push_back(std::move(line));
        }
    }
    // Wall and CPU time, best and median of several loads: on a shared machine single runs scatter.
    std::vector<double> load_wall, load_cpu;
    for (int i = 0; i < loads; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const std::clock_t cpu_start = std::clock();
      const auto tok = tfm::tokenizer::AutoTokenizer::from_pretrained(model);
      load_cpu.push_back(static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
      load_wall.push_back(seconds_since(start));
    }
    std::sort(load_wall.begin(), load_wall.end());
    std::sort(load_cpu.begin(), load_cpu.end());
    // Where a load goes, best of as many runs: reading the file, the structural pass (tree and raw vocab and
    // merges), building the pipeline from it (the model's tables), and what AutoTokenizer adds.
    double read = 1e9, parse = 1e9, build = 1e9;
    const std::string json_path = model + "/tokenizer.json";
    for (int i = 0; i < loads; ++i) {
      auto start = std::chrono::steady_clock::now();
      std::string text = tfm::io::read_file(json_path);
      read = std::min(read, seconds_since(start));
      start = std::chrono::steady_clock::now();
      const auto tj = tfm::tokenizer::TokenizerJson::parse(std::move(text));
      parse = std::min(parse, seconds_since(start));
      start = std::chrono::steady_clock::now();
      const auto tok = tfm::tokenizer::Tokenizer::from_json(tj);
      build = std::min(build, seconds_since(start));
    }
    std::printf("tfm %s: load stages (best): read %.1f ms, structure %.1f ms, tables %.1f ms\n",
                model.c_str(), read * 1e3, parse * 1e3, build * 1e3);
    const auto tok = tfm::tokenizer::AutoTokenizer::from_pretrained(model);
    double best = 1e9;
    size_t tokens = 0;
    for (int r = 0; r < repeat; ++r) {
      tokens = 0;
      const auto start = std::chrono::steady_clock::now();
      for (const std::string& line : lines) tokens += tok.encode(line, false).size();
      best = std::min(best, seconds_since(start));
    }
    std::printf(
        "tfm %s: load best %.1f ms, median %.1f ms (cpu best %.1f ms), %zu lines, %.2f MB, %zu tokens, "
        "encode %.3f s = %.2f MB/s, %.0f "
        "tokens/s\n",
        model.c_str(), load_wall.front() * 1e3, load_wall[load_wall.size() / 2] * 1e3, load_cpu.front() * 1e3,
        lines.size(), bytes / 1e6, tokens, best, bytes / 1e6 / best, tokens / best);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

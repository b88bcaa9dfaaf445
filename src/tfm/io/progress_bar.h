// A one-line byte counter on stderr in tqdm's format, as huggingface_hub shows for each file it downloads:
//   model.safetensors:  45%|████▌     | 1.23G/2.70G [00:10<00:13, 120MB/s]
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace tfm::io {

// tqdm.format_meter(n, total, elapsed, ncols, prefix=desc, unit="B", unit_scale=True, initial=initial), with
// the rate taken as (n - initial) / elapsed.
std::string format_progress_line(const std::string& desc, int64_t n, std::optional<int64_t> total,
                                 double elapsed_s, int64_t initial, int ncols);

class ProgressBar {
 public:
  // Draws only when `enabled` and stderr is a terminal; otherwise every call does nothing.
  ProgressBar(std::string desc, std::optional<int64_t> total, int64_t initial, bool enabled);
  ~ProgressBar();  // finishes the line
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(int64_t bytes);
  void reset_to(int64_t n);  // when a server ignored a resume and the count starts again

 private:
  void draw();

  std::string desc_;
  std::optional<int64_t> total_;
  int64_t initial_;
  int64_t n_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace tfm::io

// A one-line counter on stderr in tqdm's format: of bytes, as huggingface_hub shows for each file it downloads,
//   model.safetensors:  45%|████▌     | 1.23G/2.70G [00:10<00:13, 120MB/s]
// or of items, as Transformers shows while it loads weights,
//   Loading weights:  45%|████▌     | 140/311 [00:01<00:01, 120.00it/s]
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace tfm::io {

enum class ProgressUnit { bytes, items };

// Whether the environment turns progress bars off: HF_HUB_DISABLE_PROGRESS_BARS, as huggingface_hub and
// Transformers read it, or TQDM_DISABLE, as tqdm does.
bool progress_bars_disabled();

// tqdm.format_meter(n, total, elapsed, ncols, prefix=desc, initial=initial) with unit="B", unit_scale=True for
// bytes and tqdm's defaults (unit="it") for items, the rate taken as (n - initial) / elapsed.
std::string format_progress_line(const std::string& desc, int64_t n, std::optional<int64_t> total,
                                 double elapsed_s, int64_t initial, int ncols,
                                 ProgressUnit unit = ProgressUnit::bytes);

class ProgressBar {
 public:
  // Draws only when `enabled` and stderr is a terminal, and not before `delay_s` seconds have passed (tqdm's
  // delay); otherwise every call does nothing.
  ProgressBar(std::string desc, std::optional<int64_t> total, int64_t initial, bool enabled,
              ProgressUnit unit = ProgressUnit::bytes, double delay_s = 0);
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
  ProgressUnit unit_;
  double delay_s_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace tfm::io

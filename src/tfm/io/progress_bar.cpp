#include "tfm/io/progress_bar.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "tfm/io/env.h"

namespace tfm::io {

namespace {

std::string printf_string(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

// tqdm.format_sizeof with divisor 1000.
std::string format_sizeof(double num) {
  for (const char* unit : {"", "k", "M", "G", "T", "P", "E", "Z"}) {
    if (std::fabs(num) < 999.5) {
      if (std::fabs(num) < 99.95) {
        if (std::fabs(num) < 9.995) return printf_string("%1.2f", num) + unit;
        return printf_string("%2.1f", num) + unit;
      }
      return printf_string("%3.0f", num) + unit;
    }
    num /= 1000;
  }
  return printf_string("%3.1f", num) + "Y";
}

// tqdm.format_interval: [H:]MM:SS.
std::string format_interval(double seconds) {
  const long total = static_cast<long>(seconds);
  const long h = total / 3600, m = total / 60 % 60, s = total % 60;
  char buffer[48];
  if (h) {
    std::snprintf(buffer, sizeof buffer, "%ld:%02ld:%02ld", h, m, s);
  } else {
    std::snprintf(buffer, sizeof buffer, "%02ld:%02ld", m, s);
  }
  return buffer;
}

// Terminal columns a UTF-8 string takes, counting each code point as one.
int display_width(const std::string& s) {
  int width = 0;
  for (const char c : s) width += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return width;
}

int terminal_columns() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 0;
}

}  // namespace

bool progress_bars_disabled() {
  return env_is_true("HF_HUB_DISABLE_PROGRESS_BARS") || env_is_true("TQDM_DISABLE");
}

std::string format_progress_line(const std::string& desc, int64_t n, std::optional<int64_t> total,
                                 double elapsed_s, int64_t initial, int ncols, ProgressUnit unit) {
  const bool bytes = unit == ProgressUnit::bytes;
  const char* unit_name = bytes ? "B" : "it";
  auto count = [&](double v) { return bytes ? format_sizeof(v) : std::to_string(static_cast<int64_t>(v)); };
  auto scaled = [&](double v) { return bytes ? format_sizeof(v) : printf_string("%5.2f", v); };
  // Past its total, the count is shown as of an unknown total (as tqdm does).
  const int64_t t = total.value_or(0);
  const bool known_total = t > 0 && static_cast<double>(n) < static_cast<double>(t) + 0.5;
  const std::string prefix = desc.empty() ? "" : desc + ": ";
  const std::string elapsed = format_interval(elapsed_s);
  const double rate = elapsed_s > 0 ? static_cast<double>(n - initial) / elapsed_s : 0;
  std::string rate_text = std::string("?") + unit_name + "/s";
  if (rate != 0) rate_text = 1 / rate > 1 ? scaled(1 / rate) + "s/" + unit_name : scaled(rate) + unit_name + "/s";

  if (!known_total)
    return prefix + count(static_cast<double>(n)) + unit_name + " [" + elapsed + ", " + rate_text + "]";

  const double frac = t > 0 ? static_cast<double>(n) / static_cast<double>(t) : 0;
  const std::string remaining =
      rate != 0 ? format_interval(static_cast<double>(t - n) / rate) : std::string("?");
  const std::string left = prefix + printf_string("%3.0f", frac * 100) + "%|";
  const std::string right = "| " + count(static_cast<double>(n)) + "/" + count(static_cast<double>(t)) + " [" +
                            elapsed + "<" + remaining + ", " + rate_text + "]";
  const int bars = ncols > 0 ? std::max(1, ncols - display_width(left + right)) : 10;

  static constexpr const char* kBlocks[] = {" ", "▏", "▎", "▍", "▌", "▋", "▊", "▉", "█"};
  const int eighths = static_cast<int>(frac * bars * 8);
  const int full = eighths / 8;
  std::string bar;
  for (int i = 0; i < full; ++i) bar += kBlocks[8];
  if (full < bars) {
    bar += kBlocks[eighths % 8];
    bar.append(static_cast<size_t>(bars - full - 1), ' ');
  }
  return left + bar + right;
}

ProgressBar::ProgressBar(std::string desc, std::optional<int64_t> total, int64_t initial, bool enabled,
                         ProgressUnit unit, double delay_s)
    : desc_(std::move(desc)),
      total_(total),
      initial_(initial),
      n_(initial),
      enabled_(enabled && ::isatty(STDERR_FILENO)),
      unit_(unit),
      delay_s_(delay_s),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  // Long names keep their end, as huggingface_hub shows them.
  if (display_width(desc_) > 40) desc_ = "(…)" + desc_.substr(desc_.size() - 40);
  if (enabled_ && delay_s_ <= 0) draw();
}

ProgressBar::~ProgressBar() {
  if (!enabled_ || !drawn_) return;
  draw();
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

void ProgressBar::update(int64_t bytes) {
  n_ += bytes;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ >= std::chrono::milliseconds(100) &&
      std::chrono::duration<double>(now - start_).count() >= delay_s_) {
    last_draw_ = now;
    draw();
  }
}

void ProgressBar::reset_to(int64_t n) {
  n_ = n;
  initial_ = n;
}

void ProgressBar::draw() {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int columns = terminal_columns();
  std::fprintf(stderr, "\r%s", format_progress_line(desc_, n_, total_, elapsed, initial_, columns, unit_).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace tfm::io

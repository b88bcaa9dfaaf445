#include "tfm/ops/op_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tfm/backend/backend.h"
#include "tfm/io/env.h"

namespace tfm::ops {
namespace {

struct Totals {
  double seconds = 0, slowest = 0;
  long calls = 0;
};

class Profile {
 public:
  ~Profile() {
    if (by_key_.empty()) return;
    std::vector<std::pair<std::string, Totals>> rows(by_key_.begin(), by_key_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    double all = 0;
    for (const auto& [key, t] : rows) all += t.seconds;
    std::fprintf(stderr, "op profile (TFM_PROFILE_OPS): %.3f s in ops\n%10s %8s %6s %9s  %s\n", all, "ms", "calls",
                 "%", "slowest", "op [variant] tensors");
    for (const auto& [key, t] : rows) {
      std::fprintf(stderr, "%10.3f %8ld %6.2f %9.3f  %s\n", 1e3 * t.seconds, t.calls, 100 * t.seconds / all,
                   1e3 * t.slowest, key.c_str());
    }
  }

  void add(std::string key, double seconds) {
    std::lock_guard lock(mutex_);
    Totals& t = by_key_[std::move(key)];
    t.seconds += seconds;
    t.slowest = std::max(t.slowest, seconds);
    ++t.calls;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, Totals> by_key_;
};

Profile& profile() {
  static Profile p;
  return p;
}

void wait_for(Device device) {
  if (device.type != DeviceType::cpu) find_backend(device.type)->synchronize(device.index_or_zero());
}

}  // namespace

bool op_profile_enabled() {
  static const bool enabled = io::env_is_true("TFM_PROFILE_OPS");
  return enabled;
}

void profile_op(std::string_view op, std::string_view variant, std::span<const Tensor* const> tensors,
                Device device, const std::function<void()>& run) {
  wait_for(device);
  const auto start = std::chrono::steady_clock::now();
  run();
  wait_for(device);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string key(op);
  if (!variant.empty()) key += " [" + std::string(variant) + "]";
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    const std::string text = t->str();  // "bfloat16[8, 3] on cuda:0": every tensor of an op is on its device
    key += " " + text.substr(0, text.find(" on "));
  }
  profile().add(std::move(key), seconds);
}

}  // namespace tfm::ops

#include "tfm/backend/xpu/kernel_timeline.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::xpu {
namespace {

constexpr cl_ulong kHostWaitNs = 1'000'000;  // a gap this long is the host waiting, not launch overhead

struct Launch {
  const char* name;
  cl_event done;
};

struct Totals {
  long launches = 0;
  double device_ns = 0;
};

class Timeline {
 public:
  ~Timeline() {
    std::lock_guard lock(mutex_);
    if (by_name_.empty()) return;
    std::vector<std::pair<std::string, Totals>> rows(by_name_.begin(), by_name_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.device_ns > b.second.device_ns; });
    double all = 0;
    for (const auto& [name, t] : rows) all += t.device_ns;
    std::sort(gaps_.begin(), gaps_.end());
    const double median_gap = gaps_.empty() ? 0 : static_cast<double>(gaps_[gaps_.size() / 2]);
    double gap_ns = 0;
    for (cl_ulong g : gaps_) gap_ns += static_cast<double>(g);
    std::fprintf(
        stderr,
        "kernel timeline (TFM_XPU_TIMELINE): %.3f ms in kernels, %.3f ms idle between them (%zu gaps, "
        "median %.1f us; %ld longer than 1 ms left out)\n%10s %8s %6s %9s  %s\n",
        all / 1e6, gap_ns / 1e6, gaps_.size(), median_gap / 1e3, host_waits_, "ms", "launches", "%",
        "us each", "kernel");
    for (const auto& [name, t] : rows) {
      std::fprintf(stderr, "%10.3f %8ld %6.2f %9.2f  %s\n", t.device_ns / 1e6, t.launches,
                   100 * t.device_ns / all, t.device_ns / 1e3 / static_cast<double>(t.launches),
                   name.c_str());
    }
  }

  // Launches come in the order they were enqueued, and a queue runs them in that order: the completed ones at
  // the front are read, and consecutive ones of a queue are what its gaps are measured between.
  void add(const char* name, cl_event done) {
    std::lock_guard lock(mutex_);
    pending_.push_back({name, done});
    while (!pending_.empty() && completed(pending_.front().done)) {
      read(pending_.front());
      pending_.pop_front();
    }
  }

 private:
  static bool completed(cl_event e) {
    cl_int status = CL_QUEUED;
    return clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) ==
               CL_SUCCESS &&
           status == CL_COMPLETE;
  }

  void read(const Launch& l) {
    cl_ulong start = 0, end = 0;
    cl_command_queue queue = nullptr;
    const bool timed =
        clGetEventInfo(l.done, CL_EVENT_COMMAND_QUEUE, sizeof queue, &queue, nullptr) == CL_SUCCESS &&
        clGetEventProfilingInfo(l.done, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr) ==
            CL_SUCCESS &&
        clGetEventProfilingInfo(l.done, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) == CL_SUCCESS;
    clReleaseEvent(l.done);
    if (!timed || end < start) return;
    Totals& t = by_name_[l.name];
    ++t.launches;
    t.device_ns += static_cast<double>(end - start);
    cl_ulong& last_end = last_end_[queue];
    if (last_end != 0 && start >= last_end) {
      if (start - last_end < kHostWaitNs) {
        gaps_.push_back(start - last_end);
      } else {
        ++host_waits_;
      }
    }
    last_end = end;
  }

  std::mutex mutex_;
  std::deque<Launch> pending_;
  std::map<std::string, Totals> by_name_;
  std::vector<cl_ulong> gaps_;
  long host_waits_ = 0;
  std::map<cl_command_queue, cl_ulong> last_end_;  // the previous launch's end, by queue
};

Timeline& timeline() {
  static Timeline t;
  return t;
}

}  // namespace

bool kernel_timeline_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("TFM_XPU_TIMELINE");
    return value && std::string_view(value) == "1";
  }();
  return enabled;
}

void kernel_timeline_add(const char* name, cl_event done) {
  timeline().add(name, done);
}

}  // namespace tfm::xpu

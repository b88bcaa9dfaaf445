// The one parallel loop of tfm. An exception that leaves an OpenMP region calls std::terminate (SIGABRT)
// whatever try/catch surrounds the region, so no code but this header opens one: parallel_for runs its body
// on ranges of [0, n) inside the region, catches there, and rethrows after the region what the first failing
// range threw (the range a serial loop would have failed in first, so the error does not depend on timing).
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>

namespace tfm {

struct Parallel {
  bool enabled = true;  // false runs the whole loop on the calling thread (work too small to share)
  // 0: one contiguous range per thread; otherwise ranges of this many indices, handed to threads as they
  // free up (for items of uneven cost).
  int64_t chunk = 0;
};

namespace detail {

class FirstFailure {
 public:
  // A range after one already known to fail is not run: its work would be thrown away.
  bool skip(int64_t begin) const { return begin > first_.load(std::memory_order_relaxed); }
  void keep(int64_t begin, std::exception_ptr error) noexcept {
    const std::lock_guard lock(mutex_);
    if (begin < first_.load(std::memory_order_relaxed)) {
      first_.store(begin, std::memory_order_relaxed);
      error_ = std::move(error);
    }
  }
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::atomic<int64_t> first_{std::numeric_limits<int64_t>::max()};
  std::mutex mutex_;
  std::exception_ptr error_;
};

}  // namespace detail

// Calls body(begin, end) over ranges that cover [0, n) once, on OpenMP threads.
template <typename Body>
void parallel_for(int64_t n, Parallel how, Body&& body) {
  if (n <= 0) return;
  detail::FirstFailure failure;
  auto run = [&](int64_t begin, int64_t end) noexcept {
    if (begin >= end || failure.skip(begin)) return;
    try {
      body(begin, end);
    } catch (...) {
      failure.keep(begin, std::current_exception());
    }
  };
  if (how.chunk > 0) {
    const int64_t chunks = (n - 1) / how.chunk + 1;
#pragma omp parallel for schedule(dynamic) if (how.enabled && chunks > 1)
    for (int64_t c = 0; c < chunks; ++c)
      run(c * how.chunk, c * how.chunk + std::min(how.chunk, n - c * how.chunk));
  } else {
#pragma omp parallel if (how.enabled)
    {
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t share = n / threads, extra = n % threads;
      const int64_t begin = t * share + std::min(t, extra);
      run(begin, begin + share + (t < extra ? 1 : 0));
    }
  }
  failure.rethrow();
}

}  // namespace tfm

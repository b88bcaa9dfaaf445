// parallel_for: every index once, and an exception thrown on any thread reaches the caller (an exception that
// left an OpenMP region would abort the process instead).
#include <gtest/gtest.h>

#include <atomic>
#include <new>
#include <string>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/core/parallel.h"

namespace tfm {
namespace {

const Parallel kModes[] = {{}, {.chunk = 1}, {.chunk = 7}, {.enabled = false}};

TEST(ParallelFor, CoversEveryIndexOnce) {
  for (const Parallel how : kModes) {
    for (const int64_t n : {0, 1, 5, 1000}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      parallel_for(n, how, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) ++seen[static_cast<size_t>(i)];
      });
      for (const auto& s : seen) EXPECT_EQ(s.load(), 1) << n;
    }
  }
}

// The error is the one a serial loop meets first, whichever thread fails first.
TEST(ParallelFor, RethrowsTheFirstFailureInIndexOrder) {
  for (const Parallel how : kModes) {
    try {
      parallel_for(1000, how, [](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          if (i >= 300 && i % 7 == 0) throw_error("index ", i);
        }
      });
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "index 301");
    }
  }
}

TEST(ParallelFor, CarriesAnyExceptionType) {
  EXPECT_THROW(parallel_for(64, {.chunk = 1}, [](int64_t, int64_t) { throw std::bad_alloc(); }),
               std::bad_alloc);
}

}  // namespace
}  // namespace tfm

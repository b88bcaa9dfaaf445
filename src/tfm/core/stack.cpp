#include "tfm/core/stack.h"

#include <pthread.h>

#include <algorithm>
#include <cstdint>

namespace tfm {
namespace {

struct Bounds {
  const char* low = nullptr;  // stacks grow down, towards this
  size_t size = 0;
};

// pthread_getattr_np reads /proc/self/maps for the main thread: asked once per thread.
const Bounds& thread_bounds() {
  thread_local const Bounds bounds = [] {
    Bounds b;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return b;
    void* addr = nullptr;
    size_t size = 0;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
      b.low = static_cast<const char*>(addr);
      b.size = size;
    }
    pthread_attr_destroy(&attr);
    return b;
  }();
  return bounds;
}

}  // namespace

StackSpace stack_space() {
  const Bounds& b = thread_bounds();
  // The frame address, not a local's: AddressSanitizer may move locals to a heap-allocated fake stack.
  const char* here = static_cast<const char*>(__builtin_frame_address(0));
  if (!b.low || here < b.low || here > b.low + b.size) return {0, SIZE_MAX};
  return {b.size, static_cast<size_t>(here - b.low)};
}

bool stack_space_left(size_t reserve) {
  const StackSpace s = stack_space();
  return s.left >= std::min(reserve, s.size / 4);
}

}  // namespace tfm

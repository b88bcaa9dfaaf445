// How much of the calling thread's stack is left. Recursion driven by input (a template's nesting) is bounded
// by counting levels, but what a level costs depends on the build (sanitizers multiply frame sizes) and what
// the stack holds on the thread (a server's worker thread may have less than the main thread's 8 MB); the
// count alone cannot promise that the stack does not overflow, so recursive code asks this too.
#pragma once

#include <cstddef>

namespace tfm {

struct StackSpace {
  size_t size;  // the thread's whole stack; 0 where it cannot be known
  size_t left;  // below the caller's frame; SIZE_MAX where it cannot be known
};

StackSpace stack_space();

// True while at least a quarter of the thread's stack (at most `reserve` bytes) is left for what still has
// to run below the caller: leaf work such as walking a nested value, and the unwinding of an error.
bool stack_space_left(size_t reserve = size_t{1} << 20);

}  // namespace tfm

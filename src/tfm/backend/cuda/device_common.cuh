// What every .cu file of the CUDA backend shares: the element types as the device reads them, their
// conversions (the device side of floats.h, rounding to nearest even), block reductions and launch checks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/core/floats.h"
#include "tfm/backend/cuda/runtime.h"

namespace tfm::cuda {

// The device type of a storage type of floats.h: the same bits, with the CUDA headers' arithmetic.
template <typename T>
struct DeviceElement {
  using type = T;
};
template <>
struct DeviceElement<bfloat16> {
  using type = __nv_bfloat16;
};
template <>
struct DeviceElement<float16> {
  using type = __half;
};
template <typename T>
using device_t = typename DeviceElement<T>::type;

template <typename T>
device_t<T>* on_device(T* p) {
  return reinterpret_cast<device_t<T>*>(p);
}
template <typename T>
const device_t<T>* on_device(const T* p) {
  return reinterpret_cast<const device_t<T>*>(p);
}

__device__ inline float to_float(float v) {
  return v;
}
__device__ inline float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ inline float to_float(__half v) {
  return __half2float(v);
}

template <typename T>
__device__ T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) {
  return v;
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ inline __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

// log2(e): a softmax whose scores are scaled by it runs in base 2, one ex2 instruction a weight where expf
// wraps ex2 in a sequence that keeps its accuracy for large arguments.
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;  // 1 / kLog2e

// `v` rounded to T's precision and back: where torch stores an intermediate result in the tensor's dtype.
template <typename T>
__device__ float round_to(float v) {
  return to_float(from_float<T>(v));
}

// Element i of a half-split rotated head, from x = head[i], its partner head[i +- rot / 2] and the cos and
// sin at i, each product rounded as rope_ rounds it (the sum is rounded where it is stored in T): the first
// half subtracts the partner's product.
template <typename T>
__device__ float rotated(float x, float partner, float c, float s, bool first_half) {
  return round_to<T>(x * c) + round_to<T>((first_half ? -partner : partner) * s);
}

// 16 bytes of T, the widest access one instruction makes: 8 bfloat16 or float16, 4 floats.
template <typename T>
struct alignas(16) Vec {
  static constexpr int kSize = 16 / sizeof(T);
  T at[kSize];
};

// Elements [i, i + kSize) of p: one 16-byte access when `wide` (p is 16-byte aligned and i a multiple of kSize)
// and the piece lies inside [0, n), else element by element, those at or past n read as zero and not written.
// The odd sizes and offsets of views take the element path; whole pieces of aligned tensors, the wide one.
template <typename T>
__device__ inline Vec<T> load_vec(const T* p, int64_t i, int64_t n, bool wide) {
  Vec<T> v;
  if (wide && i + Vec<T>::kSize <= n) {
    const uint4 bits = *reinterpret_cast<const uint4*>(p + i);
    memcpy(&v, &bits, sizeof(v));
    return v;
  }
  for (int e = 0; e < Vec<T>::kSize; ++e) v.at[e] = i + e < n ? p[i + e] : from_float<T>(0.f);
  return v;
}
template <typename T>
__device__ inline void store_vec(T* p, int64_t i, int64_t n, bool wide, const Vec<T>& v) {
  if (wide && i + Vec<T>::kSize <= n) {
    uint4 bits;
    memcpy(&bits, &v, sizeof(v));
    *reinterpret_cast<uint4*>(p + i) = bits;
    return;
  }
  for (int e = 0; e < Vec<T>::kSize && i + e < n; ++e) p[i + e] = v.at[e];
}

// Whether every pointer is 16-byte aligned and `elements` of T (a row's length, a column offset) are whole
// 16-byte pieces: the condition for load_vec's and store_vec's wide path.
template <typename T, typename... Pointers>
bool wide_access(int64_t elements, const Pointers*... p) {
  const bool aligned = ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
  return aligned && (elements * static_cast<int64_t>(sizeof(T))) % 16 == 0;
}

// Sum and maximum over a block whose size is a multiple of 32, every thread getting the result; `shared`
// holds 32 floats. Safe to call again at once: the last barrier keeps `shared` until every thread read it.
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
  static constexpr float kIdentity = 0.f;
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
  static constexpr float kIdentity = -INFINITY;
};

template <typename Combine>
__device__ inline float warp_reduce(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = Combine()(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
template <typename Combine>
__device__ inline float block_reduce(float v, float* shared) {
  v = warp_reduce<Combine>(v);
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  const unsigned lane = threadIdx.x % 32;
  v = warp_reduce<Combine>(lane < blockDim.x / 32 ? shared[lane] : Combine::kIdentity);
  __syncthreads();
  return v;
}
__device__ inline float block_sum(float v, float* shared) {
  return block_reduce<Sum>(v, shared);
}
__device__ inline float block_max(float v, float* shared) {
  return block_reduce<Max>(v, shared);
}

// An index with its value, for argmax-like reductions in torch.argmax's order: the larger value, then the
// smaller index. no_candidate() loses to any candidate of a row.
struct Candidate {
  float value;
  int64_t index;
};
__device__ inline Candidate no_candidate() {
  return {-INFINITY, INT64_MAX};
}

__device__ inline bool better(const Candidate& a, const Candidate& b) {
  return a.value != b.value ? a.value > b.value : a.index < b.index;
}

__device__ inline Candidate warp_best(Candidate c) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Candidate other{__shfl_xor_sync(0xffffffffu, c.value, offset),
                          __shfl_xor_sync(0xffffffffu, c.index, offset)};
    if (better(other, c)) c = other;
  }
  return c;
}

// The best candidate of the block (a multiple of 32 threads), every thread getting it; `shared` holds 32.
__device__ inline Candidate block_best(Candidate c, Candidate* shared) {
  c = warp_best(c);
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = c;
  __syncthreads();
  c = warp_best(threadIdx.x % 32 < blockDim.x / 32 ? shared[threadIdx.x % 32] : no_candidate());
  __syncthreads();
  return c;
}

// n / d and n % d (n >= 0, d > 0) in 32-bit arithmetic where both fit: a 64-bit division is a long sequence
// of instructions, and in the element-wise and row-wise kernels' index math it took more issue slots than
// their loads (ncu: silu_mul at 78% of the SMs' issue rate and 60% of the memory's).
struct Division {
  int64_t quotient, remainder;
};
__device__ inline Division divide(int64_t n, int64_t d) {
  if (n <= UINT32_MAX && d <= UINT32_MAX) {
    const uint32_t n32 = static_cast<uint32_t>(n), d32 = static_cast<uint32_t>(d), q = n32 / d32;
    return {q, n32 - q * d32};
  }
  return {n / d, n % d};
}

// Brings the line holding p into this multiprocessor's L1, holding no register for it: a later load of it
// waits on L1, not on memory.
__device__ inline void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

// A grid-stride loop's first item and stride.
__device__ inline int64_t first_index() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ inline int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// How many blocks of `kernel` (at `threads` threads and `shared` bytes of dynamic shared memory) the current
// device holds at once: the grid of a grid-stride loop that keeps per-block state, such as partial sums, or
// whether a grid runs in one wave. Launchers ask on every launch (decode steps launched one by one ask it
// for most of their kernels), so each answer is kept per kernel, size and device, in one table for every
// kernel: the runtime's occupancy query is several calls, and its answer never changes.
inline unsigned resident_blocks(const void* kernel, int threads, size_t shared) {
  using Key = std::tuple<const void*, int, size_t, int>;
  static std::mutex mutex;
  static std::map<Key, unsigned> known;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  const Key key{kernel, threads, shared, device};
  std::lock_guard lock(mutex);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  int per_sm = 0, sms = 0;
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  return known[key] = static_cast<unsigned>(std::max(per_sm, 1) * sms);
}
template <typename Kernel>
unsigned resident_blocks(Kernel* kernel, int threads, size_t shared) {
  return resident_blocks(reinterpret_cast<const void*>(kernel), threads, shared);
}

// Blocks of `threads` for a grid-stride loop over n items: enough to fill the device, never more than it
// takes.
inline unsigned grid_for(int64_t n, int threads) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + threads - 1) / threads, 1, int64_t{1} << 16));
}

// Threads for one block per row of `n` items: a multiple of 32, at most 1024.
inline int threads_for_row(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + 31) / 32 * 32, 32, 1024));
}

// Lets `kernel` take `bytes` of dynamic shared memory, past the 48 KB a launch gets without asking.
template <typename Kernel>
void allow_shared_bytes(Kernel kernel, size_t bytes) {
  check_cuda(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
      "cudaFuncSetAttribute");
}

// Programmatic dependent launch (compute capability 9.0 and later): a kernel launched by launch_chained may
// start while the kernel before it on the stream is still running, so that its launch and prologue hide behind
// that kernel's tail: the ~150 small kernels of a decode step have little else to hide them (+13% there), and a
// training step's thousands gain too (+1.0% for LoRA on the Qwen3-0.6B shape). Every tfm kernel is launched so
// (cuBLASLt's are not, and wait for whatever ran before them). Until it calls wait_for_previous_kernel() a
// kernel may only read memory that no kernel of the step writes (weights): most call it first, the decode
// GEMVs after loading their first weights. That call returns once the kernel before it has finished and its
// writes are visible (and since that kernel made the same call before it exited, everything queued before it
// has finished too), then lets the next chained kernel start: at most two of them hold the device at once.
__device__ inline void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launches `kernel` on the current device's stream, chained to the kernel before it where the device supports
// it (chaining_supported; elsewhere wait_for_previous_kernel compiles to nothing and the launch is an ordinary
// one). Its status is the runtime's last error, which check_launch reads.
template <typename... Params, typename... Args>
void launch_chained(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, Args&&... args) {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  cudaLaunchAttribute chained{};
  chained.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  chained.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream(device);
  config.attrs = &chained;
  config.numAttrs = chaining_supported(device) ? 1 : 0;
  cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// Calls `launch` with `value` as a std::integral_constant when it is one of Values, and does nothing otherwise:
// a kernel template's parameter chosen at run time.
template <int... Values, typename Launch>
void with_constant(int64_t value, Launch&& launch) {
  ((value == Values ? launch(std::integral_constant<int, Values>()) : void()), ...);
}

// Throws when the launch just made failed.
inline void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) throw_error("CUDA kernel ", kernel, ": ", cudaGetErrorString(status));
}

}  // namespace tfm::cuda

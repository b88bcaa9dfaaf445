// Matmul for a few rows (decode): y (M, N) = x (M, K) @ w (N, K)^T + bias with M <= kMaxGemvRows. Reading w
// once at the memory's rate is all that matters there, and a tiled matmul wastes most of its tile on M this
// small: one warp per output column n streams w's row n in 16-byte pieces, multiplies each by the M rows of x
// (small, served by the caches) and reduces its float32 sums across the warp; the bias is added before the
// one rounding, as cuBLASLt's epilogue does.
#include <utility>

#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kWarpsPerBlock = 8;
// 16-byte pieces of its weight row each lane loads before the kernel before it has finished (device_common.cuh's
// chaining): a whole row of a 1024-wide layer in bf16, so that the smallest GEMVs stream their weights while the
// kernel that makes their input runs.
constexpr int kEarlyPieces = 4;

template <typename T, int M>
__device__ inline void accumulate(const uint4& w_piece, const T* x, int64_t K, int64_t p, float (&acc)[M]) {
  constexpr int kPerPiece = 16 / sizeof(T);
  const T* w_values = reinterpret_cast<const T*>(&w_piece);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const uint4 x_piece = __ldg(reinterpret_cast<const uint4*>(x + m * K) + p);
    const T* x_values = reinterpret_cast<const T*>(&x_piece);
#pragma unroll
    for (int e = 0; e < kPerPiece; ++e) acc[m] += to_float(w_values[e]) * to_float(x_values[e]);
  }
}

template <typename T, int M>
__global__ void gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                            T* __restrict__ y, int64_t K, int64_t N) {
  constexpr int kPerPiece = 16 / sizeof(T);
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t pieces = n < N ? K / kPerPiece : 0;
  const uint4* w_row = reinterpret_cast<const uint4*>(w + n * K);
  uint4 early[kEarlyPieces];
#pragma unroll
  for (int i = 0; i < kEarlyPieces; ++i)
    if (lane + 32 * i < pieces) early[i] = __ldcs(w_row + lane + 32 * i);  // streamed: read once per step
  wait_for_previous_kernel();
  if (n >= N) return;
  float acc[M] = {};
#pragma unroll
  for (int i = 0; i < kEarlyPieces; ++i)
    if (lane + 32 * i < pieces) accumulate<T, M>(early[i], x, K, lane + 32 * i, acc);
#pragma unroll 4
  for (int64_t p = lane + 32 * kEarlyPieces; p < pieces; p += 32) accumulate<T, M>(__ldcs(w_row + p), x, K, p, acc);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float sum = warp_reduce<Sum>(acc[m]);
    if (lane == 0) y[m * N + n] = from_float<T>(sum + (bias ? to_float(bias[n]) : 0.f));
  }
}

template <typename T, int M>
void launch_rows(const T* x, const T* w, const T* bias, T* y, int64_t K, int64_t N) {
  const unsigned blocks = static_cast<unsigned>((N + kWarpsPerBlock - 1) / kWarpsPerBlock);
  launch_chained(gemv_kernel<T, M>, blocks, kWarpsPerBlock * 32, 0, x, w, bias, y, K, N);
}

template <typename T, int... Ms>
void launch_for(int64_t M, const T* x, const T* w, const T* bias, T* y, int64_t K, int64_t N,
                std::integer_sequence<int, Ms...>) {
  ((M == Ms + 1 ? launch_rows<T, Ms + 1>(x, w, bias, y, K, N) : void()), ...);
}

}  // namespace

template <typename T>
bool gemv_takes(const T* x, const T* w, int64_t M, int64_t K) {
  const uintptr_t addresses = reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w);
  return M >= 1 && M <= kMaxGemvRows && K % (16 / static_cast<int64_t>(sizeof(T))) == 0 && addresses % 16 == 0;
}

template <typename T>
void gemv(const T* x, const T* w, const T* bias, T* y, int64_t M, int64_t K, int64_t N) {
  if (N == 0) return;
  launch_for(M, on_device(x), on_device(w), on_device(bias), on_device(y), K, N,
             std::make_integer_sequence<int, kMaxGemvRows>());
  check_launch("linear (gemv)");
}

#define TFM_GEMV_LAUNCHERS(T)                                       \
  template bool gemv_takes<T>(const T*, const T*, int64_t, int64_t); \
  template void gemv<T>(const T*, const T*, const T*, T*, int64_t, int64_t, int64_t);
TFM_GEMV_LAUNCHERS(float)
TFM_GEMV_LAUNCHERS(bfloat16)
TFM_GEMV_LAUNCHERS(float16)

}  // namespace tfm::cuda::launch

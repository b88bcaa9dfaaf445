// Matmul for a few rows (decode): y (M, N) = x (M, K) @ w (N, K)^T + bias with M <= kMaxGemvRows. Reading w
// once at the memory's rate is all that matters there, and a tiled matmul wastes most of its tile on M this
// small: one warp per output column n streams w's row n in 16-byte pieces, multiplies each by the M rows of x
// (small, served by the caches) and reduces its float32 sums across the warp; the bias is added before the
// one rounding, as cuBLASLt's epilogue does.
//
// The same kernel serves norm_linear (op_set.h), which saves a decode layer three kernels: with a norm,
// each block makes the M rows itself from the residual stream (residual add and RMSNorm, rounded as
// add_rms_norm rounds) into shared memory before its products, a few KB from L2 against the kernel launch it
// replaces; gated, a warp streams the gate's row n and the up's row n and writes silu(gate) * up (with or
// without the norm: the Qwen3-8B shape's gate/up folds the gate alone, its norm running apart).
#include <type_traits>
#include <utility>

#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kWarpsPerBlock = 8;
// 16-byte pieces of each weight row a lane loads before the kernel before it has finished
// (device_common.cuh's chaining), so that a GEMV streams its weights while the kernel that makes its input
// runs: at least a whole row of a 1024-wide layer in bf16, and for the plain kernels (no norm, no gate) of
// wider rows kMaxEarlyPieces (the 0.6B shape's o projection, 2,048 wide, whole; two thirds of its down
// projection's 3,072).
constexpr int kEarlyPieces = 4;
constexpr int kMaxEarlyPieces = 8;
// The normalised rows a block keeps in shared memory: within what a block gets without opting in (48 KB, of
// which the kernel's own reductions take a little), and small enough that blocks still share a multiprocessor.
constexpr int64_t kMaxNormedBytes = 47 << 10;

template <typename T>
__device__ inline float silu_times(float gate, float up) {
  return round_to<T>(gate / (1.f + expf(-gate))) * up;
}

// Rows of x: from global memory through the read-only cache, or from the block's shared memory.
template <typename T, bool Shared>
__device__ inline uint4 x_piece(const T* x, int64_t p) {
  if constexpr (Shared) return reinterpret_cast<const uint4*>(x)[p];
  return __ldg(reinterpret_cast<const uint4*>(x) + p);
}

template <typename T, int M, bool SharedX>
__device__ inline void accumulate(const uint4& w_piece, const T* x, int64_t K, int64_t p, float (&acc)[M]) {
  constexpr int kPerPiece = 16 / sizeof(T);
  const T* w_values = reinterpret_cast<const T*>(&w_piece);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const uint4 piece = x_piece<T, SharedX>(x + m * K, p);
    const T* x_values = reinterpret_cast<const T*>(&piece);
#pragma unroll
    for (int e = 0; e < kPerPiece; ++e) acc[m] += to_float(w_values[e]) * to_float(x_values[e]);
  }
}

// norm_linear's rows, into `rows` (shared, M x K): r = residual + pending rounded (block 0 writes it to
// residual_out), or residual alone; then weight * round(r / rms(r)). Each thread normalises the pieces it
// added, so one barrier (for the sums of squares) separates the passes.
template <typename T, int M>
__device__ void normalise_rows(const Gemv<T>& a, T* rows) {
  constexpr int E = 16 / sizeof(T);
  __shared__ float warp_sums[kWarpsPerBlock][M];
  const int64_t pieces = a.K / E;
  const bool writes_residual = blockIdx.x == 0 && a.pending;
  float sum[M] = {};
  for (int64_t p = threadIdx.x; p < pieces; p += blockDim.x) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      Vec<T> v = load_vec(a.residual + m * a.K, p * E, a.K, true);
      if (a.pending) {
        const Vec<T> x = load_vec(a.pending + m * a.K, p * E, a.K, true);
#pragma unroll
        for (int e = 0; e < E; ++e) v.at[e] = from_float<T>(to_float(v.at[e]) + to_float(x.at[e]));
        if (writes_residual) store_vec(a.residual_out + m * a.K, p * E, a.K, true, v);
      }
#pragma unroll
      for (int e = 0; e < E; ++e) sum[m] += to_float(v.at[e]) * to_float(v.at[e]);
      store_vec(rows + m * a.K, p * E, a.K, true, v);
    }
  }
  const int warp = threadIdx.x / 32;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    sum[m] = warp_reduce<Sum>(sum[m]);
    if (threadIdx.x % 32 == 0) warp_sums[warp][m] = sum[m];
  }
  __syncthreads();
  float inv[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float total = 0.f;
    for (int w = 0; w < kWarpsPerBlock; ++w) total += warp_sums[w][m];
    inv[m] = 1.f / sqrtf(total / static_cast<float>(a.K) + a.eps);
  }
  for (int64_t p = threadIdx.x; p < pieces; p += blockDim.x) {
    const Vec<T> w = load_vec(a.norm_weight, p * E, a.K, true);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      Vec<T> v = load_vec(rows + m * a.K, p * E, a.K, true);
#pragma unroll
      for (int e = 0; e < E; ++e) v.at[e] = from_float<T>(to_float(w.at[e]) * round_to<T>(to_float(v.at[e]) * inv[m]));
      store_vec(rows + m * a.K, p * E, a.K, true, v);
    }
  }
  __syncthreads();
}

// A warp per output column n: it streams w's row n (gated: rows n and n + columns, the gate's and the up's).
template <typename T, int M, bool Normed, bool Gated, int Early>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv_kernel(Gemv<T> a) {
  constexpr int kPerPiece = 16 / sizeof(T);
  constexpr int R = Gated ? 2 : 1;
  constexpr int kEarly = Early / R;  // of each row: the same bytes in flight, in fewer registers
  const int64_t columns = Gated ? a.N / 2 : a.N;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t pieces = n < columns ? a.K / kPerPiece : 0;
  const uint4* w_rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) w_rows[r] = reinterpret_cast<const uint4*>(a.w + (n + r * columns) * a.K);
  uint4 early[R][kEarly];
#pragma unroll
  for (int i = 0; i < kEarly; ++i) {
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (lane + 32 * i < pieces) early[r][i] = __ldcs(w_rows[r] + lane + 32 * i);  // streamed: read once a step
  }
  wait_for_previous_kernel();
  extern __shared__ uint4 normed_rows[];
  const T* x = a.x;
  if constexpr (Normed) {
    normalise_rows<T, M>(a, reinterpret_cast<T*>(normed_rows));
    x = reinterpret_cast<const T*>(normed_rows);
  }
  if (n >= columns) return;
  float acc[R][M] = {};
#pragma unroll
  for (int i = 0; i < kEarly; ++i) {
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (lane + 32 * i < pieces) accumulate<T, M, Normed>(early[r][i], x, a.K, lane + 32 * i, acc[r]);
  }
#pragma unroll 4
  for (int64_t p = lane + 32 * kEarly; p < pieces; p += 32) {
#pragma unroll
    for (int r = 0; r < R; ++r) accumulate<T, M, Normed>(__ldcs(w_rows[r] + p), x, a.K, p, acc[r]);
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float out[R];
#pragma unroll
    for (int r = 0; r < R; ++r)
      out[r] = warp_reduce<Sum>(acc[r][m]) + (a.bias ? to_float(a.bias[n + r * columns]) : 0.f);
    if (lane != 0) continue;
    if constexpr (Gated) {
      a.y[m * columns + n] = from_float<T>(silu_times<T>(round_to<T>(out[0]), round_to<T>(out[1])));
    } else {
      a.y[m * columns + n] = from_float<T>(out[0]);
    }
  }
}

template <typename T, int M, bool Normed, bool Gated>
unsigned blocks_of(const Gemv<T>& a) {
  const int64_t columns = Gated ? a.N / 2 : a.N;
  return static_cast<unsigned>((columns + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

template <typename T, int M, bool Normed, bool Gated>
size_t shared_bytes(const Gemv<T>& a) {
  return Normed ? static_cast<size_t>(M * a.K) * sizeof(T) : 0;
}

// Whether every block of a's kernel (loading Early pieces early) fits the device at once.
template <typename T, int M, bool Normed, bool Gated, int Early>
bool one_wave(const Gemv<T>& a) {
  return blocks_of<T, M, Normed, Gated>(a) <= resident_blocks(gemv_kernel<T, M, Normed, Gated, Early>,
                                                              kWarpsPerBlock * 32,
                                                              shared_bytes<T, M, Normed, Gated>(a));
}

// The early pieces a lane of a's kernel loads: kMaxEarlyPieces for a plain kernel whose rows are longer than
// kEarlyPieces a lane (the 0.6B shape's batch-1 decode 976-985 -> 996-998 tokens/s on an H100) where its
// blocks still fit the device at once; kEarlyPieces for the others, those with a norm or a gate among them.
// The heavier kernel takes 101 registers against 48 (bf16, one row): the 8B shape's 512-block GEMVs would run
// in two waves of fewer warps, with fewer loads in flight over rows 4,096 and 12,288 wide.
template <typename T, int M, bool Normed, bool Gated>
int early_pieces(const Gemv<T>& a) {
  const int64_t lane_pieces = a.K / (16 / static_cast<int64_t>(sizeof(T))) / 32;
  if (Normed || Gated || lane_pieces <= kEarlyPieces) return kEarlyPieces;
  return one_wave<T, M, Normed, Gated, kMaxEarlyPieces>(a) ? kMaxEarlyPieces : kEarlyPieces;
}

template <typename T, int M, bool Normed, bool Gated>
void launch_rows(const Gemv<T>& a) {
  with_constant<kEarlyPieces, kMaxEarlyPieces>(early_pieces<T, M, Normed, Gated>(a), [&](auto early) {
    launch_chained(gemv_kernel<T, M, Normed, Gated, early()>, blocks_of<T, M, Normed, Gated>(a),
                   kWarpsPerBlock * 32, shared_bytes<T, M, Normed, Gated>(a), a);
  });
}

// Calls launch(M, Normed, Gated) with the template parameters of a's kernel as integral constants.
template <typename T, typename Launch, int... Ms>
void with_kernel(const Gemv<T>& a, Launch&& launch, std::integer_sequence<int, Ms...>) {
  auto pick = [&](auto m) {
    const auto gated = [&](auto normed) {
      a.gated ? launch(m, normed, std::true_type()) : launch(m, normed, std::false_type());
    };
    a.norm_weight ? gated(std::true_type()) : gated(std::false_type());
  };
  with_constant<(Ms + 1)...>(a.M, pick);
}

template <typename T>
Gemv<device_t<T>> on_device(const Gemv<T>& a) {
  return {cuda::on_device(a.x),
          cuda::on_device(a.w),
          cuda::on_device(a.bias),
          cuda::on_device(a.y),
          a.M,
          a.K,
          a.N,
          cuda::on_device(a.residual),
          cuda::on_device(a.pending),
          cuda::on_device(a.norm_weight),
          a.eps,
          cuda::on_device(a.residual_out),
          a.gated};
}

bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

template <typename T>
bool gemv_takes(const Gemv<T>& a) {
  const bool normed = a.norm_weight != nullptr;
  const bool rows_aligned = normed ? aligned(a.residual) && aligned(a.pending) && aligned(a.norm_weight) &&
                                         aligned(a.residual_out) &&
                                         a.M * a.K * static_cast<int64_t>(sizeof(T)) <= kMaxNormedBytes
                                   : aligned(a.x);
  if (!(a.M >= 1 && a.M <= kMaxGemvRows && a.K % (16 / static_cast<int64_t>(sizeof(T))) == 0 &&
        aligned(a.w) && rows_aligned && (!a.gated || a.N % 2 == 0)))
    return false;
  if (!normed) return true;
  // With a norm every block normalises the rows, so the fold pays only where one wave of blocks covers the
  // columns: a second wave pays for the norm again (the 8B shape's qkv and gate/up, 1.5 and 4 waves, made its
  // step slower than the unfused kernels; a block looping over columns instead streamed too little).
  const Gemv<device_t<T>> d = on_device(a);
  bool fits = false;
  with_kernel(
      d,
      [&](auto m, auto normed, auto gated) {
        fits = one_wave<device_t<T>, m(), normed(), gated(), kEarlyPieces>(d);
      },
      std::make_integer_sequence<int, kMaxGemvRows>());
  return fits;
}

template <typename T>
void gemv(const Gemv<T>& a) {
  if (a.N == 0) return;
  const Gemv<device_t<T>> d = on_device(a);
  with_kernel(
      d, [&](auto m, auto normed, auto gated) { launch_rows<device_t<T>, m(), normed(), gated()>(d); },
      std::make_integer_sequence<int, kMaxGemvRows>());
  check_launch(a.norm_weight || a.gated ? "norm_linear (gemv)" : "linear (gemv)");
}

#define TFM_GEMV_LAUNCHERS(T)                  \
  template bool gemv_takes<T>(const Gemv<T>&); \
  template void gemv<T>(const Gemv<T>&);
TFM_GEMV_LAUNCHERS(float)
TFM_GEMV_LAUNCHERS(bfloat16)
TFM_GEMV_LAUNCHERS(float16)

}  // namespace tfm::cuda::launch

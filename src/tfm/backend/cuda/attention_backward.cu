// Attention's backward over a ragged batch of sequences that start at position 0 (training), in two kernels so
// that every output element has one writer (no atomics, the same sums every run): the first writes dq and keeps
// each row's log-sum-exp and dout . out, the second sums dk and dv over the query rows and heads that saw each
// key. Two forms:
// - tiles (bf16 and fp16, head_dim 64 and 128): one block per 64 query rows (or 64 keys) and a head (or kv
//   head), 64 x 64 products on the tensor cores (WMMA, float32 accumulation) as flash attention's backward does
//   them, with the gradient being accumulated kept in registers. The probabilities and the score gradients are
//   rounded to T where they enter a product, as torch's flash backward rounds them.
// - rows (every dtype and head size up to 256): one block per (query row, head), then per (key row, kv head),
//   a warp per key or query row, the head dimension over the lanes; float32 throughout.
#include <type_traits>

#include "tfm/backend/cuda/attention_tiles.cuh"
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kWarp = 32;

constexpr int kAttentionWarps = 4;
constexpr int kMaxHeadDim = 256;
constexpr int kLaneFloats = kMaxHeadDim / kWarp;

// The sequence holding `row` and where it starts.
__device__ void sequence_of(const int32_t* query_start, int64_t row, int64_t& start, int64_t& end) {
  int64_t s = 0;
  while (query_start[s + 1] <= row) ++s;
  start = query_start[s];
  end = query_start[s + 1];
}

template <typename T>
__device__ float warp_dot(const float* lane_part, const T* v, int64_t D) {
  float dot = 0.f;
  for (int t = 0; t < kLaneFloats; ++t) {
    const int64_t c = (threadIdx.x % kWarp) + t * kWarp;
    if (c < D) dot += lane_part[t] * to_float(v[c]);
  }
  return warp_reduce<Sum>(dot);
}

// The warps' register parts summed into `shared_vec` (D floats) and written to `out` in T.
template <typename T>
__device__ void write_summed(const float* lane_part, float* shared_vec, int64_t D, T* out) {
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) shared_vec[c] = 0.f;
  __syncthreads();
  for (int t = 0; t < kLaneFloats; ++t) {
    const int64_t c = (threadIdx.x % kWarp) + t * kWarp;
    if (c < D) atomicAdd(shared_vec + c, lane_part[t]);
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) out[c] = from_float<T>(shared_vec[c]);
}

template <typename T>
__device__ void load_lane_part(const T* v, int64_t D, float* part) {
  for (int t = 0; t < kLaneFloats; ++t) {
    const int64_t c = (threadIdx.x % kWarp) + t * kWarp;
    part[t] = c < D ? to_float(v[c]) : 0.f;
  }
}

template <typename T>
__global__ void attention_dq_kernel(AttentionBackwardArgs a, const T* q, const T* k, const T* v, const T* out,
                                    const T* dout, T* dq, float* lse, float* delta) {
  __shared__ float shared[32];
  __shared__ float shared_vec[kMaxHeadDim];
  const int64_t row = blockIdx.x, h = blockIdx.y, D = a.head_dim, kvh = h / (a.heads / a.kv_heads);
  int64_t start, end;
  sequence_of(a.query_start, row, start, end);
  const int64_t i = row - start, first = a.window > 0 && i - a.window + 1 > 0 ? i - a.window + 1 : 0;
  float q_part[kLaneFloats], g_part[kLaneFloats], dq_part[kLaneFloats] = {};
  load_lane_part(q + (row * a.heads + h) * D, D, q_part);
  load_lane_part(dout + (row * a.heads + h) * D, D, g_part);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  auto key = [&](const T* base, int64_t j) { return base + ((start + j) * a.kv_heads + kvh) * D; };
  float max = -INFINITY;
  for (int64_t j = first + warp; j <= i; j += kAttentionWarps) max = fmaxf(max, warp_dot(q_part, key(k, j), D) * a.scale);
  max = block_max(max, shared);
  float sum = 0.f;
  for (int64_t j = first + warp; j <= i; j += kAttentionWarps) sum += expf(warp_dot(q_part, key(k, j), D) * a.scale - max);
  sum = block_sum(lane == 0 ? sum : 0.f, shared);
  const float row_lse = max + logf(sum);
  const float row_delta = warp_dot(g_part, out + (row * a.heads + h) * D, D);
  for (int64_t j = first + warp; j <= i; j += kAttentionWarps) {
    const float p = expf(warp_dot(q_part, key(k, j), D) * a.scale - row_lse);
    const float ds = p * (warp_dot(g_part, key(v, j), D) - row_delta) * a.scale;
    const T* kj = key(k, j);
    for (int t = 0; t < kLaneFloats; ++t) {
      const int64_t c = lane + t * kWarp;
      if (c < D) dq_part[t] += ds * to_float(kj[c]);
    }
  }
  if (threadIdx.x == 0) {
    lse[row * a.heads + h] = row_lse;
    delta[row * a.heads + h] = row_delta;
  }
  write_summed(dq_part, shared_vec, D, dq + (row * a.heads + h) * D);
}

template <typename T>
__global__ void attention_dkdv_kernel(AttentionBackwardArgs a, const T* q, const T* k, const T* v, const T* dout,
                                      const float* lse, const float* delta, T* dk, T* dv) {
  __shared__ float shared_vec[kMaxHeadDim];
  const int64_t key_row = blockIdx.x, kvh = blockIdx.y, D = a.head_dim, group = a.heads / a.kv_heads;
  int64_t start, end;
  sequence_of(a.query_start, key_row, start, end);
  const int64_t last = a.window > 0 && key_row + a.window - 1 < end - 1 ? key_row + a.window - 1 : end - 1;
  float k_part[kLaneFloats], v_part[kLaneFloats], dk_part[kLaneFloats] = {}, dv_part[kLaneFloats] = {};
  load_lane_part(k + (key_row * a.kv_heads + kvh) * D, D, k_part);
  load_lane_part(v + (key_row * a.kv_heads + kvh) * D, D, v_part);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  // A warp per (query row, head of the group) pair.
  const int64_t pairs = (last - key_row + 1) * group;
  for (int64_t pair = warp; pair < pairs; pair += kAttentionWarps) {
    const int64_t row = key_row + pair / group, h = kvh * group + pair % group;
    const T* qi = q + (row * a.heads + h) * D;
    const T* gi = dout + (row * a.heads + h) * D;
    const float p = expf(warp_dot(k_part, qi, D) * a.scale - lse[row * a.heads + h]);
    const float ds = p * (warp_dot(v_part, gi, D) - delta[row * a.heads + h]) * a.scale;
    for (int t = 0; t < kLaneFloats; ++t) {
      const int64_t c = lane + t * kWarp;
      if (c < D) {
        dk_part[t] += ds * to_float(qi[c]);
        dv_part[t] += p * to_float(gi[c]);
      }
    }
  }
  write_summed(dk_part, shared_vec, D, dk + (key_row * a.kv_heads + kvh) * D);
  __syncthreads();
  write_summed(dv_part, shared_vec, D, dv + (key_row * a.kv_heads + kvh) * D);
}

// Whether query row i (of its sequence) sees key j.
__device__ inline bool sees(int64_t i, int64_t j, int64_t window) {
  return j <= i && (window <= 0 || i - j < window);
}

// Shared memory of the tile kernels: four tiles of 64 head vectors and two floats a row. Rows are padded so that
// they fall in different banks while every 16 x 16 fragment stays 32-byte aligned, as WMMA requires; at the end
// the last two tiles hold the float32 result rows (kOutLd wide) being written out.
template <typename T, int D>
struct BackwardLayout {
  static constexpr int kLd = D + 8;     // head vectors (T)
  static constexpr int kOutLd = D + 4;  // result rows (float)
  static constexpr size_t kTile = sizeof(T) * kTileRows * kLd;
  static constexpr size_t kStats = 4 * kTile;
  static constexpr size_t kBytes = kStats + 2 * sizeof(float) * kTileRows;
  static_assert(sizeof(float) * kTileRows * kOutLd <= 2 * kTile, "result rows overflow two tiles");
};

#if __CUDA_ARCH__ >= 800
// Writes the warps' accumulators (64 rows of D) as rows of T: row r to dst + r * stride, for r < rows.
template <typename T, int D>
__device__ void write_rows(Accumulator (&acc)[D / 16], float* staging, int warp_row, int rows, T* dst,
                           int64_t stride) {
  using L = BackwardLayout<T, D>;
#pragma unroll
  for (int t = 0; t < D / 16; ++t) {
    nvcuda::wmma::store_matrix_sync(staging + warp_row * L::kOutLd + t * 16, acc[t], L::kOutLd,
                                    nvcuda::wmma::mem_row_major);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < rows * D; i += blockDim.x) {
    const int r = i / D, d = i % D;
    dst[r * stride + d] = from_float<T>(staging[r * L::kOutLd + d]);
  }
  __syncthreads();
}
#endif

// Copies rows first .. first + count - 1 (count of them at most kTileRows; the rest of a tile is zeros) of one
// head of two tensors laid out (rows, heads, D) into two tiles, and waits for them; tile_b may be null.
template <typename T, int D>
__device__ void load_rows(T* tile_a, const T* a, T* tile_b, const T* b, int64_t first, int64_t count, int64_t heads,
                          int64_t head, const T* (&sources)[2][kTileRows]) {
  for (int c = threadIdx.x; c < kTileRows; c += blockDim.x) {
    const int64_t at = ((first + c) * heads + head) * D;
    sources[0][c] = c < count ? a + at : nullptr;
    sources[1][c] = c < count ? b + at : nullptr;
  }
  __syncthreads();
  start_tile_load<T, D>(tile_a, BackwardLayout<T, D>::kLd, kTileRows, sources[0]);
  if (tile_b) start_tile_load<T, D>(tile_b, BackwardLayout<T, D>::kLd, kTileRows, sources[1]);
  finish_tile_loads();
}

// One block per (64 query rows of a sequence, head): the rows' log-sum-exp in a first pass over the key tiles,
// then dq = sum over keys of ds k with ds = p (dout . v - delta) scale in a second.
template <typename T, int D>
__global__ void __launch_bounds__(kTileWarps * 32)
    dq_tiles_kernel(AttentionBackwardArgs a, const T* q, const T* k, const T* v, const T* out, const T* dout, T* dq,
                    float* lse, float* delta) {
#if __CUDA_ARCH__ >= 800
  using L = BackwardLayout<T, D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* q_tile = reinterpret_cast<T*>(smem);
  T* g_tile = reinterpret_cast<T*>(smem + L::kTile);
  T* k_tile = reinterpret_cast<T*>(smem + 2 * L::kTile);
  T* v_tile = reinterpret_cast<T*>(smem + 3 * L::kTile);
  float* row_delta = reinterpret_cast<float*>(smem + L::kStats);
  __shared__ const T* sources[2][kTileRows];

  // The last tiles of a sequence see the most keys: they start first, so that the grid's tail is light.
  int64_t s = 0, tile = 0;
  if (!find_tile(a.query_start, a.num_seqs, gridDim.x - 1 - blockIdx.x, s, tile)) return;
  const int64_t h = blockIdx.y, kv_head = h / (a.heads / a.kv_heads), start = a.query_start[s];
  const int64_t i0 = tile * kTileRows;  // of the sequence
  const int rows = static_cast<int>(min(static_cast<int64_t>(kTileRows), a.query_start[s + 1] - start - i0));
  load_rows<T, D>(q_tile, q, g_tile, dout, start + i0, rows, a.heads, h, sources);

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, warp_row = warp * 16;
  for (int r = warp; r < kTileRows; r += kTileWarps) {
    float dot = 0.f;
    if (r < rows) {
      const T* o = out + ((start + i0 + r) * a.heads + h) * D;
      for (int d = lane; d < D; d += kWarp) dot += to_float(g_tile[r * L::kLd + d]) * to_float(o[d]);
    }
    dot = warp_reduce<Sum>(dot);
    if (lane == 0) row_delta[r] = dot;
  }
  const int64_t first = a.window > 0 ? max(int64_t{0}, i0 - a.window + 1) : 0, last = i0 + rows - 1;
  auto load_keys = [&](bool with_values, int64_t j0) {
    load_rows<T, D>(k_tile, k, with_values ? v_tile : nullptr, v, start + j0, last - j0 + 1, a.kv_heads, kv_head,
                    sources);
  };
  // This lane's elements lie in two of the warp's rows (fragment_row of even and odd pairs); the four lanes
  // that share them keep the same running maximum and sum.
  auto seen = [&](int e, int64_t j0, int t) {
    const int r = warp_row + fragment_row(e);
    return r < rows && sees(i0 + r, j0 + t * 16 + fragment_column(e), a.window);
  };
  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.f, 0.f};
  for (int64_t j0 = first; j0 <= last; j0 += kTileRows) {
    load_keys(false, j0);
    if (warp_row < rows) {
      Accumulator scores[kTileRows / 16];
      products<T, D>(scores, q_tile + warp_row * L::kLd, k_tile, L::kLd);
      float tile_max[2] = {-INFINITY, -INFINITY}, tile_sum[2] = {0.f, 0.f};
#pragma unroll
      for (int t = 0; t < kTileRows / 16; ++t) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          if (seen(e, j0, t)) tile_max[(e / 2) % 2] = fmaxf(tile_max[(e / 2) % 2], scores[t].x[e] * a.scale);
        }
      }
      for (int half = 0; half < 2; ++half) {
        tile_max[half] = across_row_lanes<Max>(tile_max[half]);
        tile_max[half] = fmaxf(running_max[half], tile_max[half]);  // the new maximum
      }
#pragma unroll
      for (int t = 0; t < kTileRows / 16; ++t) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          if (seen(e, j0, t)) tile_sum[(e / 2) % 2] += expf(scores[t].x[e] * a.scale - tile_max[(e / 2) % 2]);
        }
      }
      for (int half = 0; half < 2; ++half) {
        tile_sum[half] = across_row_lanes<Sum>(tile_sum[half]);
        running_sum[half] = (tile_max[half] == -INFINITY ? 0.f : running_sum[half] * expf(running_max[half] - tile_max[half])) +
                            tile_sum[half];
        running_max[half] = tile_max[half];
      }
    }
    __syncthreads();
  }
  const float row_lse[2] = {running_max[0] + logf(running_sum[0]), running_max[1] + logf(running_sum[1])};
  if (lane % 4 == 0) {
    for (int half = 0; half < 2; ++half) {
      const int r = warp_row + lane / 4 + 8 * half;
      if (r < rows) {
        lse[(start + i0 + r) * a.heads + h] = row_lse[half];
        delta[(start + i0 + r) * a.heads + h] = row_delta[r];
      }
    }
  }

  Accumulator dq_acc[D / 16];
#pragma unroll
  for (int t = 0; t < D / 16; ++t) nvcuda::wmma::fill_fragment(dq_acc[t], 0.f);
  for (int64_t j0 = first; j0 <= last; j0 += kTileRows) {
    load_keys(true, j0);
    if (warp_row < rows) {
      Accumulator scores[kTileRows / 16], grads[kTileRows / 16];
      products<T, D>(scores, q_tile + warp_row * L::kLd, k_tile, L::kLd);
      products<T, D>(grads, g_tile + warp_row * L::kLd, v_tile, L::kLd);  // dout . v
      Weights<T> ds[kTileRows / 16];
#pragma unroll
      for (int t = 0; t < kTileRows / 16; ++t) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const int half = (e / 2) % 2;
          const float p = seen(e, j0, t) ? expf(scores[t].x[e] * a.scale - row_lse[half]) : 0.f;
          ds[t].x[e] = from_float<T>(p * (grads[t].x[e] - row_delta[warp_row + fragment_row(e)]) * a.scale);
        }
      }
#pragma unroll
      for (int t = 0; t < kTileRows / 16; ++t) accumulate<T, D>(dq_acc, ds[t], k_tile + t * 16 * L::kLd, L::kLd);
    }
    __syncthreads();
  }
  write_rows<T, D>(dq_acc, reinterpret_cast<float*>(k_tile), warp_row, rows, dq + ((start + i0) * a.heads + h) * D,
                   a.heads * D);
#else
  __trap();  // built only for devices with bf16 tensor cores (compute capability 8.0 and up)
#endif
}

// One block per (64 keys of a sequence, kv head): over the heads of the kv head's group and the query tiles that
// see the keys, dv += p^T dout and dk += ds^T q, with the rows' log-sum-exp and delta from dq_tiles_kernel.
template <typename T, int D>
__global__ void __launch_bounds__(kTileWarps * 32)
    dkdv_tiles_kernel(AttentionBackwardArgs a, const T* q, const T* k, const T* v, const T* dout, const float* lse,
                      const float* delta, T* dk, T* dv) {
#if __CUDA_ARCH__ >= 800
  using L = BackwardLayout<T, D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* k_tile = reinterpret_cast<T*>(smem);
  T* v_tile = reinterpret_cast<T*>(smem + L::kTile);
  T* q_tile = reinterpret_cast<T*>(smem + 2 * L::kTile);
  T* g_tile = reinterpret_cast<T*>(smem + 3 * L::kTile);
  float* row_lse = reinterpret_cast<float*>(smem + L::kStats);
  float* row_delta = row_lse + kTileRows;
  __shared__ const T* sources[2][kTileRows];

  int64_t s = 0, tile = 0;
  if (!find_tile(a.query_start, a.num_seqs, blockIdx.x, s, tile)) return;
  const int64_t kv_head = blockIdx.y, group = a.heads / a.kv_heads, start = a.query_start[s];
  const int64_t length = a.query_start[s + 1] - start, j0 = tile * kTileRows;
  const int keys = static_cast<int>(min(static_cast<int64_t>(kTileRows), length - j0));
  load_rows<T, D>(k_tile, k, v_tile, v, start + j0, keys, a.kv_heads, kv_head, sources);

  const int warp = threadIdx.x / kWarp, warp_row = warp * 16;
  const int64_t last = a.window > 0 ? min(length - 1, j0 + keys - 1 + a.window - 1) : length - 1;
  Accumulator dk_acc[D / 16], dv_acc[D / 16];
#pragma unroll
  for (int t = 0; t < D / 16; ++t) {
    nvcuda::wmma::fill_fragment(dk_acc[t], 0.f);
    nvcuda::wmma::fill_fragment(dv_acc[t], 0.f);
  }
  for (int64_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
    for (int64_t i0 = j0; i0 <= last; i0 += kTileRows) {
      for (int c = threadIdx.x; c < kTileRows; c += blockDim.x) {
        const bool in = i0 + c <= last;
        const int64_t row = (start + i0 + c) * a.heads + h;
        row_lse[c] = in ? lse[row] : 0.f;
        row_delta[c] = in ? delta[row] : 0.f;
      }
      load_rows<T, D>(q_tile, q, g_tile, dout, start + i0, last - i0 + 1, a.heads, h, sources);
      if (warp_row < keys) {
        // 16 query rows at a time, transposed (a row a key), so that two accumulators' worth of scores are live
        // beside dk's and dv's.
#pragma unroll 1
        for (int t = 0; t < kTileRows / 16; ++t) {
          Accumulator scores[1], grads[1];
          products<T, D, 1>(scores, k_tile + warp_row * L::kLd, q_tile + t * 16 * L::kLd, L::kLd);
          products<T, D, 1>(grads, v_tile + warp_row * L::kLd, g_tile + t * 16 * L::kLd, L::kLd);  // dout . v
          Weights<T> p, ds;
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const int kr = warp_row + fragment_row(e), c = t * 16 + fragment_column(e);
            const bool seen = kr < keys && i0 + c <= last && sees(i0 + c, j0 + kr, a.window);
            const float weight = seen ? expf(scores[0].x[e] * a.scale - row_lse[c]) : 0.f;
            p.x[e] = from_float<T>(weight);
            ds.x[e] = from_float<T>(weight * (grads[0].x[e] - row_delta[c]) * a.scale);
          }
          accumulate<T, D>(dv_acc, p, g_tile + t * 16 * L::kLd, L::kLd);
          accumulate<T, D>(dk_acc, ds, q_tile + t * 16 * L::kLd, L::kLd);
        }
      }
      __syncthreads();
    }
  }
  const int64_t stride = a.kv_heads * D;
  float* staging = reinterpret_cast<float*>(q_tile);
  write_rows<T, D>(dk_acc, staging, warp_row, keys, dk + ((start + j0) * a.kv_heads + kv_head) * D, stride);
  write_rows<T, D>(dv_acc, staging, warp_row, keys, dv + ((start + j0) * a.kv_heads + kv_head) * D, stride);
#else
  __trap();  // built only for devices with bf16 tensor cores (compute capability 8.0 and up)
#endif
}

template <typename Kernel>
void allow_shared_bytes(Kernel kernel, size_t bytes) {
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
             "cudaFuncSetAttribute");
}

template <typename T, int D>
void launch_tiles(const AttentionBackwardArgs& a, const T* q, const T* k, const T* v, const T* out, const T* dout,
                  float* lse, float* delta, T* dq, T* dk, T* dv) {
  constexpr size_t bytes = BackwardLayout<T, D>::kBytes;
  static const bool configured = [] {
    allow_shared_bytes(dq_tiles_kernel<T, D>, bytes);
    allow_shared_bytes(dkdv_tiles_kernel<T, D>, bytes);
    return true;
  }();
  (void)configured;
  const unsigned tiles = tile_grid(a.rows, a.num_seqs);
  dq_tiles_kernel<T, D><<<dim3(tiles, static_cast<unsigned>(a.heads)), kTileWarps * 32, bytes, current_stream()>>>(
      a, q, k, v, out, dout, dq, lse, delta);
  check_launch("attention_backward (dq tiles)");
  dkdv_tiles_kernel<T, D><<<dim3(tiles, static_cast<unsigned>(a.kv_heads)), kTileWarps * 32, bytes,
                            current_stream()>>>(a, q, k, v, dout, lse, delta, dk, dv);
  check_launch("attention_backward (dk, dv tiles)");
}

}  // namespace

template <typename T>
void attention_backward(const AttentionBackwardArgs& a, const T* q, const T* k, const T* v, const T* out,
                        const T* dout, float* lse, float* delta, T* dq, T* dk, T* dv) {
  check(a.head_dim <= kMaxHeadDim, "attention_backward on cuda takes head_dim up to ", kMaxHeadDim, ", not ",
        a.head_dim);
  if (a.rows == 0) return;
  if constexpr (sizeof(T) == 2) {
    if (a.head_dim == 64 || a.head_dim == 128) {
      auto launch = [&](auto d) {
        launch_tiles<device_t<T>, d()>(a, on_device(q), on_device(k), on_device(v), on_device(out), on_device(dout),
                                       lse, delta, on_device(dq), on_device(dk), on_device(dv));
      };
      with_constant<64, 128>(a.head_dim, launch);
      return;
    }
  }
  const unsigned threads = kAttentionWarps * kWarp;
  attention_dq_kernel<<<dim3(static_cast<unsigned>(a.rows), static_cast<unsigned>(a.heads)), threads, 0,
                        current_stream()>>>(a, on_device(q), on_device(k), on_device(v), on_device(out),
                                            on_device(dout), on_device(dq), lse, delta);
  check_launch("attention_backward (dq)");
  attention_dkdv_kernel<<<dim3(static_cast<unsigned>(a.rows), static_cast<unsigned>(a.kv_heads)), threads, 0,
                          current_stream()>>>(a, on_device(q), on_device(k), on_device(v), on_device(dout), lse,
                                              delta, on_device(dk), on_device(dv));
  check_launch("attention_backward (dk, dv)");
}

#define TFM_ATTENTION_BACKWARD_LAUNCHERS(T)                                                                  \
  template void attention_backward<T>(const AttentionBackwardArgs&, const T*, const T*, const T*, const T*, \
                                      const T*, float*, float*, T*, T*, T*);
TFM_ATTENTION_BACKWARD_LAUNCHERS(float)
TFM_ATTENTION_BACKWARD_LAUNCHERS(bfloat16)
TFM_ATTENTION_BACKWARD_LAUNCHERS(float16)

}  // namespace tfm::cuda::launch

// Attention's backward over a ragged batch of sequences that start at position 0 (training), in kernels that
// give every output element one writer (no atomics, the same sums every run): one keeps each row's
// log-sum-exp and dout . out, one sums dk and dv over the query rows and heads that saw each key, and dq is
// summed over the keys each row saw. Two forms:
// - tiles (bf16 and fp16, head_dim 64 and 128): one block per 64 query rows (or 64 keys) and a head (or kv
//   head), four warps of 16 rows, products on the tensor cores (mma.sync, float32 accumulation) with scores,
//   probabilities and the gradients being accumulated in registers, as flash attention 2's backward. The
//   probabilities and the score gradients are rounded to T where they enter a product, as torch's flash
//   backward rounds them. Where the caller knows the longest sequence and the score gradients of every pair
//   of tiles fit kMaxKeptBytes, the dk/dv kernel keeps them (rounded, as they enter its product) and dq is
//   their product with the keys: one product where recomputing them takes three. Elsewhere the row
//   statistics' kernel goes on to recompute them for dq, before dk/dv.
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
  wait_for_previous_kernel();
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
  wait_for_previous_kernel();
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

// Shared memory of the tile kernels: 2 G + 2 tiles of 64 head vectors (a tile of each of G heads for two
// tensors, and two more), rows kTileLd apart, and two floats a row of the G heads.
template <typename T, int D, int G = 1>
struct BackwardLayout {
  static constexpr int kLd = kTileLd<D>;
  static constexpr size_t kTile = sizeof(T) * kTileRows * kLd;
  static constexpr size_t kStats = (2 * G + 2) * kTile;
  static constexpr size_t kBytes = kStats + 2 * sizeof(float) * G * kTileRows;
};

// The kept score gradients: for each sequence in order, each pair of a query tile i and a key tile j <= i
// (pair i (i + 1) / 2 + j of the sequence), each head, 64 queries by 64 keys of T as the A fragments of dq's
// product (16 x 16 each, in the order of their query block then their key block), each fragment its 32 lanes'
// 16 bytes in lane order: the dk/dv kernel writes a fragment and dq's reads it 512 contiguous bytes a warp.
// Every pair that some query of tile i and key of tile j share is written whole.
constexpr int kKeptTile = kTileRows * kTileRows;
constexpr int kFragmentBlocks = kTileRows / 16;  // query (or key) blocks of a kept tile
constexpr int64_t kMaxKeptBytes = int64_t{1} << 30;

// The pairs of the sequences before s, plus pair (query_tile, key_tile) of s.
__device__ int64_t kept_pair(const int32_t* query_start, int64_t s, int64_t query_tile, int64_t key_tile) {
  int64_t pairs = 0;
  for (int64_t p = 0; p < s; ++p) {
    const int64_t tiles = (query_start[p + 1] - query_start[p] + kTileRows - 1) / kTileRows;
    pairs += tiles * (tiles + 1) / 2;
  }
  return pairs + query_tile * (query_tile + 1) / 2 + key_tile;
}

// The pairs of a call, at most: with n tiles in the longest sequence, a sequence has at most (n + 1) / 2
// pairs a tile of its own, and the sequences have at most (rows + 63 a sequence) / 64 tiles.
int64_t kept_pairs_bound(const AttentionBackwardArgs& a) {
  const int64_t longest = (a.max_rows + kTileRows - 1) / kTileRows;
  const int64_t tiles = (a.rows + (kTileRows - 1) * a.num_seqs) / kTileRows;
  return (tiles * (longest + 1) + 1) / 2;
}

// Where this lane's part of the fragment of a query block and a key block lies in a kept tile, in pieces of
// 16 bytes.
__device__ inline int kept_fragment(int query_block, int key_block) {
  return (query_block * kFragmentBlocks + key_block) * 32 + static_cast<int>(threadIdx.x % 32);
}

// Keeps a warp's score gradients of 16 keys by 16 queries, given as the A fragment whose rows are the keys,
// as the fragment of the queries' rows (its transpose).
template <typename T>
__device__ void keep_gradients(T* tile, int query_block, int key_block, const FragA& of_keys) {
  const FragA ds = transposed(of_keys);
  reinterpret_cast<uint4*>(tile)[kept_fragment(query_block, key_block)] =
      make_uint4(ds.x[0], ds.x[1], ds.x[2], ds.x[3]);
}

// Writes the 16 x D result a warp holds as C fragments (acc[t]: columns 8t ..) to rows of T: fragment row r to
// dst + r * stride, for the rows below `rows`.
template <typename T, int D>
__device__ void write_fragments(const FragC (&acc)[D / 8], int rows, T* dst, int64_t stride) {
  for (int half = 0; half < 2; ++half) {
    const int r = fragment_group() + 8 * half;
    if (r >= rows) continue;
    T* row = dst + r * stride + fragment_pair();
#pragma unroll
    for (int t = 0; t < D / 8; ++t) {
      row[t * 8] = from_float<T>(acc[t].x[2 * half]);
      row[t * 8 + 1] = from_float<T>(acc[t].x[2 * half + 1]);
    }
  }
}

// One block per (64 query rows of a sequence, G heads of one kv head): the rows' delta (dout . out) and
// log-sum-exp (the forward's, or from a first pass over the key tiles), then, WithDq, flash attention 2's dq
// = sum over keys of ds k with ds = p (dout . v - delta) scale in a second pass. Four warps a head, each
// keeping its 16 rows' scores and dq in registers; the operands stay in shared memory, where one load of a
// key or value tile serves the G heads (L2's bandwidth bounds the kernel otherwise).
template <typename T, int D, int G, bool WithDq>
__global__ void __launch_bounds__(kTileWarps * 32 * G, G == 1 ? 3 : 2)
    dq_tiles_kernel(AttentionBackwardArgs a, const T* q, const T* k, const T* v, const T* out, const T* dout,
                    T* dq, float* lse, float* delta) {
  wait_for_previous_kernel();
#if __CUDA_ARCH__ >= 800
  using L = BackwardLayout<T, D, G>;
  constexpr int kThreads = kTileWarps * 32 * G;
  extern __shared__ __align__(128) unsigned char smem[];
  T* q_tile = reinterpret_cast<T*>(smem);  // G tiles, then G of dout
  T* g_tile = reinterpret_cast<T*>(smem + G * L::kTile);
  T* k_tile = reinterpret_cast<T*>(smem + 2 * G * L::kTile);
  T* v_tile = reinterpret_cast<T*>(smem + (2 * G + 1) * L::kTile);
  float* row_delta = reinterpret_cast<float*>(smem + L::kStats);  // G x kTileRows

  // The last tiles of a sequence see the most keys: they start first, so that the grid's tail is light.
  int64_t s = 0, tile = 0;
  if (!find_tile(a.query_start, a.num_seqs, gridDim.x - 1 - blockIdx.x, s, tile)) return;
  const int64_t first_head = blockIdx.y * G, kv_head = first_head / (a.heads / a.kv_heads),
                start = a.query_start[s];
  const int i0 = static_cast<int>(tile * kTileRows);  // of the sequence
  const int rows = static_cast<int>(min(static_cast<int64_t>(kTileRows), a.query_start[s + 1] - start - i0));
  if (WithDq || !a.forward_lse)
    start_head_rows<T, D, G, kThreads>(q_tile, q, start + i0, rows, a.heads, first_head);
  start_head_rows<T, D, G, kThreads>(g_tile, dout, start + i0, rows, a.heads, first_head);
  wait_rows_loads();

  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, c = fragment_pair();
  const int head_of_warp = warp / kTileWarps, warp_row = warp % kTileWarps * 16;
  const int64_t h = first_head + head_of_warp;
  const T* warp_q = q_tile + (head_of_warp * kTileRows + warp_row) * L::kLd;
  const T* warp_g = g_tile + (head_of_warp * kTileRows + warp_row) * L::kLd;
  // Each row's delta from 16-byte pieces, kPieces lanes a row.
  constexpr int kPieces = D / Vec<T>::kSize, kRowsAtOnce = kWarp / kPieces;
  for (int r0 = warp * kRowsAtOnce; r0 < G * kTileRows; r0 += G * kTileWarps * kRowsAtOnce) {
    const int r = r0 + lane / kPieces,
              piece = lane % kPieces * Vec<T>::kSize;  // row r % kTileRows of head r / kTileRows
    float dot = 0.f;
    if (r % kTileRows < rows) {
      const T* o = out + ((start + i0 + r % kTileRows) * a.heads + first_head + r / kTileRows) * D + piece;
      const Vec<T> ov = load_vec(o, 0, Vec<T>::kSize, true),
                   gv = load_vec(g_tile + r * L::kLd + piece, 0, Vec<T>::kSize, true);
#pragma unroll
      for (int e = 0; e < Vec<T>::kSize; ++e) dot += to_float(gv.at[e]) * to_float(ov.at[e]);
    }
#pragma unroll
    for (int lanes = kPieces / 2; lanes > 0; lanes /= 2) dot += __shfl_xor_sync(~0u, dot, lanes);
    if (lane % kPieces == 0) row_delta[r] = dot;
  }
  __syncthreads();
  const int first = a.window > 0 ? max(0, i0 - static_cast<int>(a.window) + 1) : 0, last = i0 + rows - 1;
  bool real[2];
  int row_first[2], row_last[2];
  float delta_of[2];
  for (int half = 0; half < 2; ++half) {
    const int r = warp_row + fragment_group() + 8 * half, i = i0 + r;
    real[half] = r < rows;
    row_first[half] = a.window > 0 ? max(0, i - static_cast<int>(a.window) + 1) : 0;
    row_last[half] = i;
    delta_of[half] = row_delta[head_of_warp * kTileRows + r];
  }
  const WarpKeys keys(real, row_first, row_last);
  // The scores of this warp's rows against the 8 x Tiles keys of `keys_tile` (starting at key j0), scaled for
  // a softmax in base 2 (by log2(e) too), and -inf where a row does not see the key.
  const auto scores_of = [&](auto& scores, const T* keys_tile, int j0) {
    constexpr int Tiles = std::extent_v<std::remove_reference_t<decltype(scores)>>;
    head_products<T, D, Tiles>(scores, warp_q, keys_tile, L::kLd);
    const bool whole = keys.every(j0, 8 * Tiles);
#pragma unroll
    for (int t = 0; t < Tiles; ++t) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool seen = whole || keys.sees(e / 2, j0 + t * 8 + c + e % 2);
        scores[t].x[e] = seen ? scores[t].x[e] * (a.scale * kLog2e) : -INFINITY;
      }
    }
  };

  // Pass 1: the log-sum-exp in base 2 (dkdv_tiles_kernel reads it so), from the forward's where it kept it;
  // else over the key tiles, alternating between two buffers so that the next loads while this one is scored.
  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.f, 0.f};  // running_sum: this lane's part
  const auto start_keys = [&](T* tile_buffer, int j0) {
    start_head_rows<T, D, 1, kThreads>(tile_buffer, k, start + j0, last - j0 + 1, a.kv_heads, kv_head);
  };
  if (!a.forward_lse) start_keys(k_tile, first);
  __pipeline_commit();
  for (int j0 = first, n = 0; !a.forward_lse && j0 <= last; j0 += kTileRows, ++n) {
    T* current = n % 2 ? v_tile : k_tile;
    __pipeline_wait_prior(0);
    __syncthreads();  // the current tile is in; every warp is done with the other buffer
    if (j0 + kTileRows <= last) start_keys(n % 2 ? k_tile : v_tile, j0 + kTileRows);
    __pipeline_commit();
    if (keys.some(j0, kTileRows)) {
      FragC scores[kTileRows / 8];
      scores_of(scores, current, j0);
      float tile_max[2] = {running_max[0], running_max[1]};
#pragma unroll
      for (int t = 0; t < kTileRows / 8; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], scores[t].x[e]);
      }
      for (int half = 0; half < 2; ++half) {
        tile_max[half] = across_row_lanes<Max>(tile_max[half]);
        if (tile_max[half] == -INFINITY) continue;
        running_sum[half] *= exp2f(running_max[half] - tile_max[half]);
        running_max[half] = tile_max[half];
      }
#pragma unroll
      for (int t = 0; t < kTileRows / 8; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (running_max[e / 2] != -INFINITY)
            running_sum[e / 2] += exp2f(scores[t].x[e] - running_max[e / 2]);
        }
      }
    }
  }
  float row_lse[2];
  for (int half = 0; half < 2; ++half) {
    const int r = warp_row + fragment_group() + 8 * half;
    if (a.forward_lse) {
      row_lse[half] = real[half] ? a.forward_lse[(start + i0 + r) * a.heads + h] * kLog2e : 0.f;
    } else {
      row_lse[half] = running_max[half] + log2f(across_row_lanes<Sum>(running_sum[half]));
    }
    if (c == 0 && real[half]) {
      lse[(start + i0 + r) * a.heads + h] = row_lse[half];
      delta[(start + i0 + r) * a.heads + h] = delta_of[half];
    }
  }
  if constexpr (!WithDq) return;
  __syncthreads();  // every warp is done with both key buffers

  // Pass 2: dq, each tile of keys in parts of kPart, which keeps the scores and their gradients in fewer
  // registers beside dq's.
  constexpr int kPart = 32;
  FragC dq_acc[D / 8] = {};
  for (int j0 = first; j0 <= last; j0 += kTileRows) {
    start_keys(k_tile, j0);
    start_head_rows<T, D, 1, kThreads>(v_tile, v, start + j0, last - j0 + 1, a.kv_heads, kv_head);
    wait_rows_loads();
#pragma unroll 1
    for (int part = 0; part < kTileRows; part += kPart) {
      if (!keys.some(j0 + part, kPart)) continue;
      const T* part_keys = k_tile + part * L::kLd;
      FragC scores[kPart / 8], grads[kPart / 8];
      scores_of(scores, part_keys, j0 + part);
      head_products<T, D, kPart / 8>(grads, warp_g, v_tile + part * L::kLd, L::kLd);  // dout . v
#pragma unroll
      for (int t = 0; t < kPart / 8; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float p = exp2f(scores[t].x[e] - row_lse[e / 2]);  // 0 where not seen
          grads[t].x[e] = p * (grads[t].x[e] - delta_of[e / 2]) * a.scale;
        }
      }
      FragA ds[kPart / 16];
#pragma unroll
      for (int n = 0; n < kPart / 16; ++n) ds[n] = as_operand<T>(grads[2 * n], grads[2 * n + 1]);
      weigh_rows<T, D, kPart / 16>(dq_acc, ds, part_keys, L::kLd);
    }
    __syncthreads();  // every warp is done with the tiles
  }
  if (warp_row < rows) {
    write_fragments<T, D>(dq_acc, rows - warp_row, dq + ((start + i0 + warp_row) * a.heads + h) * D, a.heads * D);
  }
#else
  __trap();  // built only for devices with bf16 tensor cores (compute capability 8.0 and up)
#endif
}

// One block per (64 keys of a sequence, kv head), flash attention 2's dk and dv: over the heads of the kv
// head's group and the query tiles that see the keys, dv += p^T dout and dk += ds^T q, with the rows'
// log-sum-exp and delta from dq_tiles_kernel (the log-sum-exp in base 2). Each warp holds 16 keys' dk and dv
// and works through a query tile 16 rows at a time, its scores transposed (a row a key): steps that small
// keep the kernel in 168 registers, so that three blocks share a multiprocessor (with 32 rows a step, four
// independent products a step more, it took 242 and two blocks fit: 9% slower). Keeps: the score gradients
// of every pair of tiles it sees are written to `kept` (zeros where no query sees a key), for dq.
template <typename T, int D, bool Keeps>
__global__ void __launch_bounds__(kTileWarps * 32, 2)
    dkdv_tiles_kernel(AttentionBackwardArgs a, const T* q, const T* k, const T* v, const T* dout,
                      const float* lse, const float* delta, T* kept, int64_t kept_pairs, T* dk, T* dv) {
  wait_for_previous_kernel();
#if __CUDA_ARCH__ >= 800
  using L = BackwardLayout<T, D>;
  constexpr int kStep = 16;  // query rows a step
  extern __shared__ __align__(128) unsigned char smem[];
  T* k_tile = reinterpret_cast<T*>(smem);
  T* v_tile = reinterpret_cast<T*>(smem + L::kTile);
  T* q_tile = reinterpret_cast<T*>(smem + 2 * L::kTile);
  T* g_tile = reinterpret_cast<T*>(smem + 3 * L::kTile);
  float* row_lse = reinterpret_cast<float*>(smem + L::kStats);
  float* row_delta = row_lse + kTileRows;

  int64_t s = 0, tile = 0;
  if (!find_tile(a.query_start, a.num_seqs, blockIdx.x, s, tile)) return;
  const int64_t kv_head = blockIdx.y, group = a.heads / a.kv_heads, start = a.query_start[s];
  const int length = static_cast<int>(a.query_start[s + 1] - start), j0 = static_cast<int>(tile * kTileRows);
  const int keys = min(kTileRows, length - j0);
  start_head_rows<T, D>(k_tile, k, start + j0, keys, a.kv_heads, kv_head);
  start_head_rows<T, D>(v_tile, v, start + j0, keys, a.kv_heads, kv_head);

  const int warp = threadIdx.x / kWarp, warp_row = warp * 16, c = fragment_pair();
  const int window = static_cast<int>(a.window);
  // The queries that see some key of the block; this lane's two keys (rows of its fragments) and the warp's.
  const int last = window > 0 ? min(length - 1, j0 + keys - 1 + window - 1) : length - 1;
  int key_of[2];
  for (int half = 0; half < 2; ++half) key_of[half] = j0 + warp_row + fragment_group() + 8 * half;
  const int warp_first_key = j0 + warp_row, warp_last_key = min(j0 + keys - 1, warp_first_key + 15);
  // Query i sees key j where j <= i (and i - j < window); i <= last and j < j0 + keys hold for whatever is read.
  const auto sees = [&](int i, int j) { return j <= i && (window <= 0 || i - j < window) && j < j0 + keys; };
  const int64_t pairs_before = Keeps ? kept_pair(a.query_start, s, 0, 0) : 0;
  FragC dk_acc[D / 8] = {}, dv_acc[D / 8] = {};
  // The warp's keys and values as A fragments, read from shared memory once (every query step takes them).
  FragA k_frags[D / 16], v_frags[D / 16];
  bool have_frags = false;
  for (int64_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
    for (int i0 = j0; i0 <= last; i0 += kTileRows) {
      const int queries = min(kTileRows, last - i0 + 1);
      T* kept_tile = nullptr;
      if constexpr (Keeps) {
        const int64_t query_tile = i0 / kTileRows,
                      pair = pairs_before + query_tile * (query_tile + 1) / 2 + tile;
        if (pair >= kept_pairs) __trap();  // a sequence longer than the caller's max_rows
        kept_tile = kept + (pair * a.heads + h) * kKeptTile;
      }
      for (int r = threadIdx.x; r < kTileRows; r += blockDim.x) {
        const int64_t row = (start + i0 + r) * a.heads + h;
        row_lse[r] = r < queries ? lse[row] : 0.f;
        row_delta[r] = r < queries ? delta[row] : 0.f;
      }
      start_head_rows<T, D>(q_tile, q, start + i0, queries, a.heads, h);
      start_head_rows<T, D>(g_tile, dout, start + i0, queries, a.heads, h);
      wait_rows_loads();
      if (!have_frags) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          k_frags[kk] = load_a(k_tile + warp_row * L::kLd + kk * 16, L::kLd);
          v_frags[kk] = load_a(v_tile + warp_row * L::kLd + kk * 16, L::kLd);
        }
        have_frags = true;
      }
#pragma unroll 1
      // Keeping the gradients, every step of the tile: those past the queries or the keys write zeros.
      for (int q0 = 0; q0 < (Keeps ? kTileRows : warp_row < keys ? queries : 0); q0 += kStep) {
        // Skip a step no query of which sees the warp's keys; mask one that some pair of it does not.
        const int first_query = i0 + q0, last_query = min(i0 + queries - 1, first_query + kStep - 1);
        if ((Keeps && (warp_row >= keys || q0 >= queries)) || last_query < warp_first_key ||
            (window > 0 && first_query - warp_last_key >= window)) {
          if (Keeps) reinterpret_cast<uint4*>(kept_tile)[kept_fragment(q0 / 16, warp_row / 16)] = uint4{};
          continue;
        }
        const bool whole = warp_last_key <= first_query &&
                           (window <= 0 || last_query - warp_first_key < window) &&
                           last_query - first_query == kStep - 1 && warp_last_key == warp_first_key + 15;
        FragC scores[kStep / 8], grads[kStep / 8];
        products_with<T, D>(
            scores, [&](int kk) { return k_frags[kk]; }, q_tile + q0 * L::kLd, L::kLd);
        products_with<T, D>(
            grads, [&](int kk) { return v_frags[kk]; }, g_tile + q0 * L::kLd, L::kLd);
#pragma unroll
        for (int t = 0; t < kStep / 8; ++t) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int column = q0 + t * 8 + c + e % 2, i = i0 + column;
            const bool seen = whole || (i <= last && sees(i, key_of[e / 2]));
            const float p = seen ? exp2f(scores[t].x[e] * (a.scale * kLog2e) - row_lse[column]) : 0.f;
            scores[t].x[e] = p;
            grads[t].x[e] = p * (grads[t].x[e] - row_delta[column]) * a.scale;
          }
        }
        FragA p_frags[kStep / 16], ds_frags[kStep / 16];
#pragma unroll
        for (int n = 0; n < kStep / 16; ++n) {
          p_frags[n] = as_operand<T>(scores[2 * n], scores[2 * n + 1]);
          ds_frags[n] = as_operand<T>(grads[2 * n], grads[2 * n + 1]);
        }
        if (Keeps) keep_gradients(kept_tile, q0 / 16, warp_row / 16, ds_frags[0]);
        weigh_rows<T, D, kStep / 16>(dv_acc, p_frags, g_tile + q0 * L::kLd, L::kLd);
        weigh_rows<T, D, kStep / 16>(dk_acc, ds_frags, q_tile + q0 * L::kLd, L::kLd);
      }
      __syncthreads();  // every warp is done with the query tile
    }
  }
  if (warp_row < keys) {
    const int64_t stride = a.kv_heads * D, at = ((start + j0 + warp_row) * a.kv_heads + kv_head) * D;
    write_fragments<T, D>(dk_acc, keys - warp_row, dk + at, stride);
    write_fragments<T, D>(dv_acc, keys - warp_row, dv + at, stride);
  }
#else
  __trap();  // built only for devices with bf16 tensor cores (compute capability 8.0 and up)
#endif
}

// dq_kept_kernel's shared memory: two stages of a tile of keys, rows kTileLd apart.
template <typename T, int D>
struct KeptKeysLayout {
  static constexpr int kLd = kTileLd<D>;
  static constexpr size_t kStage = sizeof(T) * kTileRows * kLd;
  static constexpr size_t kBytes = 2 * kStage;
};

// One block per (64 query rows of a sequence, G heads of one kv head): dq = the kept score gradients of the
// rows times the keys, over the key tiles the rows see. Four warps a head, each summing its 16 rows' dq in
// registers from its fragments of the gradients (read from global memory a tile ahead) and the key tiles,
// which two stages of shared memory hold (the next loading while this one is summed).
template <typename T, int D, int G>
__global__ void __launch_bounds__(kTileWarps * 32 * G, 2)
    dq_kept_kernel(AttentionBackwardArgs a, const T* k, const T* kept, int64_t kept_pairs, T* dq) {
  wait_for_previous_kernel();
#if __CUDA_ARCH__ >= 800
  using L = KeptKeysLayout<T, D>;
  constexpr int kThreads = kTileWarps * 32 * G;
  extern __shared__ __align__(128) unsigned char smem[];
  int64_t s = 0, tile = 0;
  if (!find_tile(a.query_start, a.num_seqs, gridDim.x - 1 - blockIdx.x, s, tile)) return;
  const int64_t first_head = blockIdx.y * G, kv_head = first_head / (a.heads / a.kv_heads),
                start = a.query_start[s];
  const int length = static_cast<int>(a.query_start[s + 1] - start), i0 = static_cast<int>(tile * kTileRows);
  const int rows = min(kTileRows, length - i0), last_tile = static_cast<int>(tile);
  // From the key tile holding the first row's first key to the rows' own.
  const int first_tile = (a.window > 0 ? max(0, i0 - static_cast<int>(a.window) + 1) : 0) / kTileRows;
  const int64_t pairs = kept_pair(a.query_start, s, tile, 0);
  if (pairs + tile >= kept_pairs) __trap();  // a sequence longer than the caller's max_rows
  const auto start_keys = [&](int stage, int key_tile) {
    const int j0 = key_tile * kTileRows;
    start_head_rows<T, D, 1, kThreads>(reinterpret_cast<T*>(smem + stage * L::kStage), k, start + j0,
                                       length - j0, a.kv_heads, kv_head);
  };

  const int warp = threadIdx.x / kWarp, warp_row = warp % kTileWarps * 16;
  const int64_t h = first_head + warp / kTileWarps;
  const auto load_gradients = [&](FragA(&ds)[kFragmentBlocks], int key_tile) {
    const auto* gradients =
        reinterpret_cast<const uint4*>(kept + ((pairs + key_tile) * a.heads + h) * kKeptTile);
#pragma unroll
    for (int kb = 0; kb < kFragmentBlocks; ++kb) {
      const uint4 bits = gradients[kept_fragment(warp_row / 16, kb)];
      ds[kb] = {{bits.x, bits.y, bits.z, bits.w}};
    }
  };
  FragC acc[D / 8] = {};
  FragA ds[kFragmentBlocks], next[kFragmentBlocks];
  start_keys(0, first_tile);
  __pipeline_commit();
  load_gradients(ds, first_tile);
  for (int key_tile = first_tile, n = 0; key_tile <= last_tile; ++key_tile, ++n) {
    if (key_tile < last_tile) {
      start_keys((n + 1) % 2, key_tile + 1);
      load_gradients(next, key_tile + 1);
    }
    __pipeline_commit();
    __pipeline_wait_prior(1);
    __syncthreads();  // this tile's keys are in
    weigh_rows<T, D, kFragmentBlocks>(acc, ds, reinterpret_cast<const T*>(smem + (n % 2) * L::kStage),
                                      L::kLd);
#pragma unroll
    for (int kb = 0; kb < kFragmentBlocks; ++kb) ds[kb] = next[kb];
    __syncthreads();  // every warp is done with the stage before the next but one loads into it
  }
  if (warp_row < rows) {
    write_fragments<T, D>(acc, rows - warp_row, dq + ((start + i0 + warp_row) * a.heads + h) * D,
                          a.heads * D);
  }
#else
  __trap();  // built only for devices with bf16 tensor cores (compute capability 8.0 and up)
#endif
}

template <typename T, int D>
void launch_tiles(const AttentionBackwardArgs& a, const T* q, const T* k, const T* v, const T* out,
                  const T* dout, float* lse, float* delta, T* kept, T* dq, T* dk, T* dv) {
  constexpr size_t bytes = BackwardLayout<T, D>::kBytes;
  static const bool configured = [] {
    allow_shared_bytes(dq_tiles_kernel<T, D, 1, true>, bytes);
    allow_shared_bytes(dq_tiles_kernel<T, D, 2, true>, BackwardLayout<T, D, 2>::kBytes);
    allow_shared_bytes(dq_tiles_kernel<T, D, 1, false>, bytes);
    allow_shared_bytes(dq_tiles_kernel<T, D, 2, false>, BackwardLayout<T, D, 2>::kBytes);
    allow_shared_bytes(dkdv_tiles_kernel<T, D, false>, bytes);
    allow_shared_bytes(dkdv_tiles_kernel<T, D, true>, bytes);
    return true;
  }();
  (void)configured;
  const unsigned tiles = tile_grid(a.rows, a.num_seqs);
  const int64_t kept_pairs = kept ? kept_pairs_bound(a) : 0;
  const int heads_per_block = tile_heads(a.heads, a.kv_heads);
  const dim3 grid(tiles, static_cast<unsigned>(a.heads / heads_per_block));
  with_constant<1, 2>(heads_per_block, [&](auto heads) {
    constexpr int G = heads();
    const auto statistics = kept ? dq_tiles_kernel<T, D, G, false> : dq_tiles_kernel<T, D, G, true>;
    launch_chained(statistics, grid, kTileWarps * 32 * G, BackwardLayout<T, D, G>::kBytes, a, q, k, v, out,
                   dout, dq, lse, delta);
  });
  check_launch(kept ? "attention_backward (row statistics)" : "attention_backward (dq tiles)");
  const auto dkdv = kept ? dkdv_tiles_kernel<T, D, true> : dkdv_tiles_kernel<T, D, false>;
  launch_chained(dkdv, dim3(tiles, static_cast<unsigned>(a.kv_heads)), kTileWarps * 32, bytes, a, q, k, v,
                 dout, lse, delta, kept, kept_pairs, dk, dv);
  check_launch("attention_backward (dk, dv tiles)");
  if (!kept) return;
  with_constant<1, 2>(heads_per_block, [&](auto heads) {
    constexpr int G = heads();
    launch_chained(dq_kept_kernel<T, D, G>, grid, kTileWarps * 32 * G, KeptKeysLayout<T, D>::kBytes, a, k,
                   kept, kept_pairs, dq);
  });
  check_launch("attention_backward (dq from the kept gradients)");
}

// The tile kernels take bf16 and fp16 at head sizes 64 and 128.
template <typename T>
bool uses_tiles(const AttentionBackwardArgs& a) {
  return sizeof(T) == 2 && (a.head_dim == 64 || a.head_dim == 128);
}

}  // namespace

template <typename T>
int64_t attention_backward_kept_bytes(const AttentionBackwardArgs& a) {
  if (!uses_tiles<T>(a) || a.max_rows == 0) return 0;
  const int64_t bytes = kept_pairs_bound(a) * a.heads * kKeptTile * static_cast<int64_t>(sizeof(T));
  return bytes <= kMaxKeptBytes ? bytes : 0;
}

template <typename T>
void attention_backward(const AttentionBackwardArgs& a, const T* q, const T* k, const T* v, const T* out,
                        const T* dout, float* lse, float* delta, void* kept, T* dq, T* dk, T* dv) {
  check(a.head_dim <= kMaxHeadDim, "attention_backward on cuda takes head_dim up to ", kMaxHeadDim, ", not ",
        a.head_dim);
  if (a.rows == 0) return;
  if constexpr (sizeof(T) == 2) {
    if (uses_tiles<T>(a)) {
      auto launch = [&](auto d) {
        launch_tiles<device_t<T>, d()>(a, on_device(q), on_device(k), on_device(v), on_device(out),
                                       on_device(dout), lse, delta, static_cast<device_t<T>*>(kept),
                                       on_device(dq), on_device(dk), on_device(dv));
      };
      with_constant<64, 128>(a.head_dim, launch);
      return;
    }
  }
  const unsigned threads = kAttentionWarps * kWarp;
  launch_chained(attention_dq_kernel<device_t<T>>,
                 dim3(static_cast<unsigned>(a.rows), static_cast<unsigned>(a.heads)), threads, 0, a,
                 on_device(q), on_device(k), on_device(v), on_device(out), on_device(dout), on_device(dq),
                 lse, delta);
  check_launch("attention_backward (dq)");
  launch_chained(attention_dkdv_kernel<device_t<T>>,
                 dim3(static_cast<unsigned>(a.rows), static_cast<unsigned>(a.kv_heads)), threads, 0, a,
                 on_device(q), on_device(k), on_device(v), on_device(dout), lse, delta, on_device(dk),
                 on_device(dv));
  check_launch("attention_backward (dk, dv)");
}

#define TFM_ATTENTION_BACKWARD_LAUNCHERS(T)                                                                 \
  template int64_t attention_backward_kept_bytes<T>(const AttentionBackwardArgs&);                          \
  template void attention_backward<T>(const AttentionBackwardArgs&, const T*, const T*, const T*, const T*, \
                                      const T*, float*, float*, void*, T*, T*, T*);
TFM_ATTENTION_BACKWARD_LAUNCHERS(float)
TFM_ATTENTION_BACKWARD_LAUNCHERS(bfloat16)
TFM_ATTENTION_BACKWARD_LAUNCHERS(float16)

}  // namespace tfm::cuda::launch

// What the tensor-core attention kernels share (the prefill forward in attention.cu, the training backward in
// attention_backward.cu): 64-row tiles of a ragged batch's sequences, four warps of 16 rows a block, tiles of
// head vectors copied into shared memory with cp.async, and which keys the two rows of a lane's fragments see.
// The products themselves are mma_fragments.cuh's.
#pragma once

#include <cuda_pipeline.h>

#include <cstdint>

#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/mma_fragments.cuh"

namespace tfm::cuda {

constexpr int kTileRows = 64;  // query rows (or keys) of a tile
constexpr int kTileWarps = 4;  // a block's warps, 16 rows of the tile each

// The tile a block takes: its index over every sequence's tiles of kTileRows rows, in order. Returns false
// when the index is past them (grids are sized for the worst case: one partial tile per sequence).
__device__ inline bool find_tile(const int32_t* query_start, int64_t num_seqs, int64_t index, int64_t& seq,
                                 int64_t& tile) {
  for (seq = 0; seq < num_seqs; ++seq) {
    const int64_t tiles = (query_start[seq + 1] - query_start[seq] + kTileRows - 1) / kTileRows;
    if (index < tiles) {
      tile = index;
      return true;
    }
    index -= tiles;
  }
  return false;
}

// Heads of a kv head's group that one tile block serves: two where the group pairs up, so that one load of a
// key or value tile serves both (the kernels are bound by what they read from L2 otherwise), else one.
inline int tile_heads(int64_t heads, int64_t kv_heads) {
  return (heads / kv_heads) % 2 == 0 ? 2 : 1;
}

// Blocks enough for every tile of `rows` rows in `num_seqs` sequences.
inline unsigned tile_grid(int64_t rows, int64_t num_seqs) {
  return static_cast<unsigned>((rows + kTileRows - 1) / kTileRows + num_seqs);
}

// Elements between the rows of a tile in shared memory: D padded by 16 bytes (of 16-bit elements), so that
// the eight rows of an ldmatrix fall in different banks.
template <int D>
inline constexpr int kTileLd = D + 8;

// Starts copying Rows rows of D elements into `tile` (rows ld apart) with cp.async, the block's Threads
// threads sharing each row: row r from source(r), or zeros where that is null. The caller commits and waits
// (wait_rows_loads).
template <typename T, int D, int Rows = kTileRows, int Threads = kTileWarps * 32, typename Source>
__device__ void start_rows_load(T* tile, int ld, const Source& source) {
  static_assert(Threads % Rows == 0, "whole rows a thread group");
  constexpr int kPiece = 16 / sizeof(T), kPieces = D / kPiece, kThreadsPerRow = Threads / Rows;
  const int r = static_cast<int>(threadIdx.x) / kThreadsPerRow;
  const int part = static_cast<int>(threadIdx.x) % kThreadsPerRow;
  const T* from = source(r);
  T* to = tile + r * ld;
#pragma unroll
  for (int p = part; p < kPieces; p += kThreadsPerRow) {
    if (from) {
      __pipeline_memcpy_async(to + p * kPiece, from + p * kPiece, 16);
    } else {
      *reinterpret_cast<uint4*>(to + p * kPiece) = make_uint4(0, 0, 0, 0);
    }
  }
}

// Waits for every copy started so far and for every thread of the block to reach it.
__device__ inline void wait_rows_loads() {
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
}

// Rows first .. first + count - 1 (at most kTileRows; the rest of each tile zeros) of heads head .. head + G
// - 1 of a tensor laid out (rows, heads, D), copied into G tiles (kTileLd apart) one after the other by the
// block's Threads threads, without waiting.
template <typename T, int D, int G = 1, int Threads = kTileWarps * 32>
__device__ void start_head_rows(T* tile, const T* x, int64_t first, int64_t count, int64_t heads,
                                int64_t head) {
  start_rows_load<T, D, G * kTileRows, Threads>(tile, kTileLd<D>, [&](int r) {
    const int row = r % kTileRows;
    return row < count ? x + ((first + row) * heads + head + r / kTileRows) * D : nullptr;
  });
}

// acc[t] = A (8 * Tiles rows of `b`)^T, for head vectors of D (rows of b ld apart): A is 16 rows of D whose
// k-step kk (columns 16 kk ..) `a_frag(kk)` gives as an A fragment, from registers or from shared memory.
template <typename T, int D, int Tiles, typename AFragment>
__device__ void products_with(FragC (&acc)[Tiles], const AFragment& a_frag, const T* b, int ld) {
#pragma unroll
  for (int t = 0; t < Tiles; ++t) acc[t] = FragC{};
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const FragA a = a_frag(kk);
#pragma unroll
    for (int n = 0; n < Tiles / 2; ++n) {
      FragB left, right;
      load_b_pair<true>(left, right, b + n * 16 * ld + kk * 16, ld);
      mma<T>(acc[2 * n], a, left);
      mma<T>(acc[2 * n + 1], a, right);
    }
  }
}

// acc[t] = (16 rows of `a`) (8 * Tiles rows of `b`)^T for head vectors of D, rows ld apart: each row of a
// dotted with each row of b.
template <typename T, int D, int Tiles>
__device__ void head_products(FragC (&acc)[Tiles], const T* a, const T* b, int ld) {
  products_with<T, D>(
      acc, [&](int kk) { return load_a(a + kk * 16, ld); }, b, ld);
}

// acc (16 rows of D) += weights (16 rows of 16 * Steps, as A fragments) times 16 * Steps rows of `b` (D wide,
// rows ld apart).
template <typename T, int D, int Steps>
__device__ void weigh_rows(FragC (&acc)[D / 8], const FragA (&weights)[Steps], const T* b, int ld) {
#pragma unroll
  for (int k = 0; k < Steps; ++k) {
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      FragB left, right;
      load_b_pair<false>(left, right, b + k * 16 * ld + dp * 16, ld);
      mma<T>(acc[2 * dp], weights[k], left);
      mma<T>(acc[2 * dp + 1], weights[k], right);
    }
  }
}

// v combined over the four lanes that hold the same fragment rows, every one of them getting the result: a
// row's maximum or sum over a tile, from each lane's part of it.
template <typename Combine>
__device__ inline float across_row_lanes(float v) {
  v = Combine()(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return Combine()(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// The keys that the two rows of this lane's fragments (fragment_group() and 8 more) see, each a range
// first..last (first > last: none), and over the warp's rows the keys some row sees and those every row sees:
// so that a warp skips a tile of keys no row of it sees, and masks only a tile some row sees in part. Rows past
// the tile's (`real` false) see nothing and take no part: the kernels leave their results unwritten. Every lane
// of the warp constructs it.
struct WarpKeys {
  int first[2], last[2];
  int some_first, some_last, every_first, every_last;

  __device__ WarpKeys(const bool (&real)[2], const int (&row_first)[2], const int (&row_last)[2]) {
    for (int half = 0; half < 2; ++half) {
      first[half] = real[half] ? row_first[half] : INT32_MAX;
      last[half] = real[half] ? row_last[half] : -1;
    }
    some_first = __reduce_min_sync(~0u, min(first[0], first[1]));
    some_last = __reduce_max_sync(~0u, max(last[0], last[1]));
    every_first = __reduce_max_sync(~0u, max(real[0] ? first[0] : 0, real[1] ? first[1] : 0));
    every_last = __reduce_min_sync(~0u, min(real[0] ? last[0] : INT32_MAX, real[1] ? last[1] : INT32_MAX));
  }
  // Whether some row sees one of the keys j0 .. j0 + count - 1; whether every row sees them all.
  __device__ bool some(int j0, int count) const { return j0 <= some_last && j0 + count - 1 >= some_first; }
  __device__ bool every(int j0, int count) const { return j0 >= every_first && j0 + count - 1 <= every_last; }
  __device__ bool sees(int half, int j) const { return j >= first[half] && j <= last[half]; }
};

}  // namespace tfm::cuda

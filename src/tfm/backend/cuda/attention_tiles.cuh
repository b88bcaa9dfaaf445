// What the tensor-core attention kernels share (the prefill forward in attention.cu, the training backward in
// attention_backward.cu): 64-row tiles of a ragged batch's sequences, tiles of head vectors copied into shared
// memory with cp.async, and 16 x 16 x 16 WMMA products with float32 accumulation.
#pragma once

#include <cuda_pipeline.h>
#include <mma.h>

#include <cstdint>

#include "tfm/backend/cuda/device_common.cuh"

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

// Blocks enough for every tile of `rows` rows in `num_seqs` sequences.
inline unsigned tile_grid(int64_t rows, int64_t num_seqs) {
  return static_cast<unsigned>((rows + kTileRows - 1) / kTileRows + num_seqs);
}

// Starts copying rows of global memory into a shared tile of `ld`-element rows, 16 bytes at a time, without
// waiting for them (cp.async): every load of the tile is in flight at once. `sources[r]` is row r's address,
// or null for a row of zeros. The caller commits and waits.
template <typename T, int D>
__device__ void start_tile_load(T* tile, int ld, int rows, const T* const* sources) {
  constexpr int kPiece = 16 / sizeof(T), kPieces = D / kPiece;
  for (int i = threadIdx.x; i < rows * kPieces; i += blockDim.x) {
    const int r = i / kPieces, p = i % kPieces;
    T* dst = tile + r * ld + p * kPiece;
    if (sources[r]) {
      __pipeline_memcpy_async(dst, sources[r] + p * kPiece, 16);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    }
  }
}

__device__ inline void finish_tile_loads() {
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
}

#if __CUDA_ARCH__ >= 800
using Accumulator = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;

// acc[t] += A B_t on the tensor cores, for the Tiles 16-column blocks B_t of B: A is 16 rows of 16 * steps
// (row-major at `a`), B 16 * steps rows (at `b`, stored as BLayout; step k's block starts b_step elements
// after step k - 1's, block t's b_tile elements after block t - 1's). Each fragment of A is loaded once for
// every block of B: shared memory's bandwidth, not the tensor cores, bounds these kernels.
template <typename T, typename BLayout, int Tiles>
__device__ void multiply_add(Accumulator (&acc)[Tiles], const T* a, int lda, const T* b, int ldb, int steps,
                             int b_step, int b_tile) {
  using namespace nvcuda;
  for (int k = 0; k < steps; ++k) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a_part;
    wmma::load_matrix_sync(a_part, a + k * 16, lda);
#pragma unroll
    for (int t = 0; t < Tiles; ++t) {
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, BLayout> b_part;
      wmma::load_matrix_sync(b_part, b + k * b_step + t * b_tile, ldb);
      wmma::mma_sync(acc[t], a_part, b_part, acc[t]);
    }
  }
}

// Where element e of this lane's 16 x 16 accumulator fragment sits, and of its matrix_a fragment of 16-bit
// elements, which is laid out alike: WMMA's m16n16k16 tiles are two m16n8k16 mma tiles on sm_80 and later (row
// lane / 4, or 8 more; columns 2 (lane % 4) and the next, or 8 more). CUDA does not document it; the
// conformance tests of every dtype check the kernels that rely on it. With it, scores stay in registers: the
// softmax works on them there, and probabilities become the next product's left operand without a trip
// through shared memory, as flash attention keeps them.
__device__ inline int fragment_row(int e) {
  return static_cast<int>(threadIdx.x % 32) / 4 + 8 * ((e / 2) % 2);
}
__device__ inline int fragment_column(int e) {
  return 2 * static_cast<int>(threadIdx.x % 4) + e % 2 + 8 * (e / 4);
}

// v combined over the four lanes that hold the same fragment rows (fragment_row alike), every one of them
// getting the result: a row's maximum or sum over a tile, from each lane's part of it.
template <typename Combine>
__device__ inline float across_row_lanes(float v) {
  v = Combine()(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return Combine()(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// 16 rows of `a` (head vectors, D wide, rows ld apart) times the first 16 * Tiles rows of `b` transposed.
template <typename T, int D, int Tiles = kTileRows / 16>
__device__ void products(Accumulator (&acc)[Tiles], const T* a, const T* b, int ld) {
#pragma unroll
  for (int t = 0; t < Tiles; ++t) nvcuda::wmma::fill_fragment(acc[t], 0.f);
  multiply_add<T, nvcuda::wmma::col_major>(acc, a, ld, b, ld, D / 16, 16, 16 * ld);
}

// acc[] (16 rows of a D-wide result) += `weights` (16 rows by 16) times 16 rows of `tile` (rows ld apart).
template <typename T, int D, typename Weights>
__device__ void accumulate(Accumulator (&acc)[D / 16], const Weights& weights, const T* tile, int ld) {
  using namespace nvcuda;
#pragma unroll
  for (int t = 0; t < D / 16; ++t) {
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b_part;
    wmma::load_matrix_sync(b_part, tile + t * 16, ld);
    wmma::mma_sync(acc[t], weights, b_part, acc[t]);
  }
}

template <typename T>
using Weights = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, T, nvcuda::wmma::row_major>;
#endif

}  // namespace tfm::cuda

// Kernels over rows of up to some thousands of elements (RMSNorm and its backward): a row is split among a
// group of `lanes` threads, each holding kVecs 16-byte pieces of it in registers, so that the row is read
// from memory once however many passes the math makes over it. Groups of up to a warp reduce with shuffles
// alone, several to a block; a wider group is the whole block and reduces through shared memory. Blocks
// stride over the rows, a group's lane holding the same columns in every row it visits.
#pragma once

#include "tfm/backend/cuda/device_common.cuh"

namespace tfm::cuda {

// Pieces a lane holds: the kernels are instantiated for each. A row longer than a block's lanes can hold
// (256 lanes of kMaxRowVecs: 8,192 16-bit or 4,096 float32 elements) takes the kernel for 0, which holds none
// and reads the row again in each pass.
constexpr int kMaxRowVecs = 4;

// The most threads a block of the kernel for `vecs` has, so that its registers fit (__launch_bounds__).
constexpr int row_block_limit(int vecs) {
  return vecs == 0 ? 1024 : vecs == 1 ? 512 : 256;
}

struct RowLayout {
  int lanes;    // threads of a row: a power of two, up to 1024
  int vecs;     // 16-byte pieces a lane holds: 0 (none), 1, 2 or kMaxRowVecs
  int threads;  // of a block: 256, several groups of up to a warp; or one wider group
};

// Rows of `pieces` 16-byte pieces: up to max_vecs pieces a lane (fewer for a kernel that holds more per
// piece), halved as long as a smaller group would leave a piece unheld; when the rows are too few to fill the
// device (decode's), more lanes a row and fewer pieces each.
inline RowLayout row_layout(int64_t rows, int64_t pieces, int max_vecs = kMaxRowVecs) {
  constexpr int64_t kFillThreads = int64_t{1} << 15;  // 8 warps a multiprocessor of a large GPU
  if (pieces > 256 * max_vecs) return {1024, 0, 1024};
  int vecs = max_vecs, lanes = 1;
  while (static_cast<int64_t>(lanes) * vecs < pieces) lanes *= 2;
  while (vecs > 1 && static_cast<int64_t>(lanes) * vecs / 2 >= pieces) vecs /= 2;
  while (vecs > 1 && lanes * 2 <= row_block_limit(vecs / 2) && rows * lanes < kFillThreads) {
    lanes *= 2;
    vecs /= 2;
  }
  return {lanes, vecs, lanes > 32 ? lanes : 256};
}

// Calls launch(std::integral_constant<int, vecs>) for layout.vecs (of a row_layout for up to kMaxVecs), so
// that the kernel is the one for it.
template <int kMaxVecs, typename Launch>
void with_row_vecs(const RowLayout& layout, Launch&& launch) {
  switch (layout.vecs) {
    case 0:
      return launch(std::integral_constant<int, 0>());
    case 1:
      return launch(std::integral_constant<int, 1>());
    case 2:
      return launch(std::integral_constant<int, 2>());
    default:
      return launch(std::integral_constant<int, kMaxVecs>());
  }
}

// A block's view of its rows: which group (and so which row of the block's current ones) this thread is in,
// its lane in the group, and where piece k of the lane lies in a row.
struct RowGroup {
  int lanes, lane, group, groups;

  __device__ explicit RowGroup(int lanes_)
      : lanes(lanes_),
        lane(static_cast<int>(threadIdx.x) & (lanes_ - 1)),
        group(static_cast<int>(threadIdx.x) / lanes_),
        groups(static_cast<int>(blockDim.x) / lanes_) {}

  // The block's first row at each step of its loop over rows; every thread takes every step (the
  // reductions need all of a warp), those past the last row with an inactive row.
  __device__ int64_t first_row() const { return static_cast<int64_t>(blockIdx.x) * groups; }
  __device__ int64_t row_stride() const { return static_cast<int64_t>(gridDim.x) * groups; }

  // Where piece k of the lane starts; a lane's pieces are those whose start is inside the row.
  template <typename T>
  __device__ int64_t column(int k) const {
    return (static_cast<int64_t>(k) * lanes + lane) * Vec<T>::kSize;
  }

  // The sum over the group, every lane getting it; `shared` holds 32 floats (used when the group is the block).
  __device__ float sum(float v, float* shared) const {
    if (lanes > 32) return block_sum(v, shared);
    for (int offset = lanes / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
  }
};

}  // namespace tfm::cuda

// Row copies: embedding, gather_rows, kv_cache_write and split_columns move whole rows without looking at
// the values, so one kernel over bytes serves them all, in the widest word every address and length allows.
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"

namespace tfm::cuda::launch {
namespace {

struct RowCopies {
  RowCopy copy[kMaxRowCopies];
};

// blockIdx.y picks the copy; blocks stride over its rows, threads over a row's words.
template <typename Word>
__global__ void copy_rows_kernel(RowCopies copies, int64_t rows) {
  const RowCopy& c = copies.copy[blockIdx.y];
  wait_for_previous_kernel();
  const int64_t words = c.row_bytes / static_cast<int64_t>(sizeof(Word));
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t from = c.src_rows ? c.src_rows[r] : r, to = c.dst_rows ? c.dst_rows[r] : r;
    if (from < 0 || to < 0) continue;  // a padding row's slot, or a row op_set.h skips
    const Word* src = reinterpret_cast<const Word*>(static_cast<const char*>(c.src) + from * c.src_pitch);
    Word* dst = reinterpret_cast<Word*>(static_cast<char*>(c.dst) + to * c.dst_pitch);
    for (int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
  }
}

template <typename Word>
void launch(const RowCopies& copies, int count, int64_t rows, int64_t longest_row) {
  const int threads = std::min(threads_for_row(longest_row / static_cast<int64_t>(sizeof(Word))), 256);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 16)),
                  static_cast<unsigned>(count));
  launch_chained(copy_rows_kernel<Word>, grid, threads, 0, copies, rows);
}

}  // namespace

void copy_rows(const RowCopy* copies, int count, int64_t rows, const char* op) {
  if (rows == 0 || count == 0) return;
  if (count > kMaxRowCopies) throw_error("CUDA kernel ", op, ": more than ", kMaxRowCopies, " row copies");
  RowCopies all{};
  uint64_t bits = 16;  // the alignment of every address, pitch and length, up to 16 bytes
  int64_t longest = 0;
  for (int i = 0; i < count; ++i) {
    const RowCopy& c = all.copy[i] = copies[i];
    bits |= reinterpret_cast<uintptr_t>(c.src) | reinterpret_cast<uintptr_t>(c.dst) |
            static_cast<uint64_t>(c.src_pitch) | static_cast<uint64_t>(c.dst_pitch) |
            static_cast<uint64_t>(c.row_bytes);
    longest = std::max(longest, c.row_bytes);
  }
  switch (bits & -bits) {
    case 16:
      launch<uint4>(all, count, rows, longest);
      break;
    case 8:
      launch<uint2>(all, count, rows, longest);
      break;
    case 4:
      launch<uint32_t>(all, count, rows, longest);
      break;
    case 2:
      launch<uint16_t>(all, count, rows, longest);
      break;
    default:
      launch<uint8_t>(all, count, rows, longest);
  }
  check_launch(op);
}

}  // namespace tfm::cuda::launch

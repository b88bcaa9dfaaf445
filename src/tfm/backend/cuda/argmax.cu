// Greedy choice on the device: the index of each row's largest value, so that a decode step hands the host
// one id per sequence instead of a row of the vocabulary. A row is split over enough blocks to fill the device
// (one block scanning a 151,936-word row waits out a memory latency per element it loads: 68 us, against the
// few the bytes take); each block scans its share in 16-byte pieces and keeps torch.argmax's order (the larger
// value, then the smaller index), and the last of a row's blocks to finish (split_blocks.h) merges their
// candidates. A row holding a NaN or an infinity gets -1.
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"
#include "tfm/backend/cuda/split_blocks.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMinSplitElements = 4096;
constexpr int kMaxSplits = 64;

// What a share of a row holding a NaN or an infinity gives: index -1, the row's id.
__device__ inline Candidate not_finite() {
  return {NAN, -1};
}

// This thread's candidate from its part of row[begin, end).
template <typename T>
__device__ Candidate scan(const T* row, int64_t begin, int64_t end, bool wide) {
  constexpr int E = Vec<T>::kSize;
  Candidate best = no_candidate();
  bool finite = true;
#pragma unroll 4
  for (int64_t i = begin + threadIdx.x * E; i < end; i += kThreads * E) {
    const Vec<T> v = load_vec(row, i, end, wide);
#pragma unroll
    for (int e = 0; e < E && i + e < end; ++e) {
      const Candidate c{to_float(v.at[e]), i + e};
      finite = finite && isfinite(c.value);
      if (better(c, best)) best = c;
    }
  }
  return finite ? best : not_finite();
}

// The block's best candidate (every thread's a candidate or not_finite()), or not_finite() where any is.
__device__ Candidate block_choice(Candidate c, Candidate* warps) {
  return __syncthreads_and(c.index >= 0) ? block_best(c, warps) : not_finite();
}

// Block (row, split) scans its share of the row; `partial` holds rows x splits candidates when split.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    argmax_rows_kernel(const T* x, int64_t V, bool wide, Candidate* partial, unsigned* arrivals, int32_t* ids) {
  __shared__ Candidate warps[32];
  __shared__ bool last;
  wait_for_previous_kernel();
  const int64_t row = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
  const int64_t chunk = (V + splits - 1) / splits / Vec<T>::kSize * Vec<T>::kSize + Vec<T>::kSize;
  const int64_t begin = min(V, split * chunk), end = min(V, begin + chunk);
  const Candidate c = block_choice(scan(x + row * V, begin, end, wide), warps);
  if (splits == 1) {
    if (threadIdx.x == 0) ids[row] = static_cast<int32_t>(c.index);
    return;
  }
  if (threadIdx.x == 0) partial[row * splits + split] = c;
  __threadfence();  // the candidate is visible before the arrival counts
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(arrivals + row, 1u) == static_cast<unsigned>(splits - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  const Candidate mine = threadIdx.x < splits ? partial[row * splits + threadIdx.x] : no_candidate();
  const Candidate best = block_choice(mine, warps);
  if (threadIdx.x == 0) {
    ids[row] = static_cast<int32_t>(best.index);
    arrivals[row] = 0;
  }
}

// Splits of each row: enough blocks for four a multiprocessor, none scanning less than kMinSplitElements.
int64_t split_count(int64_t rows, int64_t V) {
  static const int64_t sms = multiprocessors();
  const int64_t by_device = (4 * sms + rows - 1) / rows, by_length = (V + kMinSplitElements - 1) / kMinSplitElements;
  return std::clamp<int64_t>(std::min(by_device, by_length), 1, kMaxSplits);
}

}  // namespace

int64_t argmax_rows_workspace_bytes(int64_t rows, int64_t V) {
  const int64_t splits = rows > 0 ? split_count(rows, V) : 1;
  return splits > 1 ? rows * splits * static_cast<int64_t>(sizeof(Candidate)) : 0;
}

template <typename T>
void argmax_rows(const T* x, int64_t rows, int64_t V, int32_t* ids, void* workspace) {
  if (rows == 0) return;
  const int64_t splits = split_count(rows, V);
  unsigned* arrivals = splits > 1 ? arrival_counters(rows, "argmax_rows") : nullptr;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(splits));
  launch_chained(argmax_rows_kernel<device_t<T>>, grid, kThreads, 0, on_device(x), V, wide_access<T>(V, x),
                 static_cast<Candidate*>(workspace), arrivals, ids);
  check_launch("argmax_rows");
}

template void argmax_rows<float>(const float*, int64_t, int64_t, int32_t*, void*);
template void argmax_rows<bfloat16>(const bfloat16*, int64_t, int64_t, int32_t*, void*);
template void argmax_rows<float16>(const float16*, int64_t, int64_t, int32_t*, void*);

}  // namespace tfm::cuda::launch

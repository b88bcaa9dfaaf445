// Greedy choice on the device: the index of each row's largest value, so that a decode step hands the host
// one id per sequence instead of a row of the vocabulary. One block per row; each thread scans a strided share
// of the row, then the block merges (value, index) pairs, keeping torch.argmax's order: the larger value, then
// the smaller index. A row holding a NaN or an infinity gets -1.
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kThreads = 1024;

template <typename T>
__global__ void argmax_rows_kernel(const T* x, int64_t V, int32_t* ids) {
  __shared__ Candidate warps[32];
  wait_for_previous_kernel();
  const T* row = x + blockIdx.x * V;
  Candidate best = no_candidate();
  bool finite = true;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    const Candidate c{to_float(row[i]), i};
    finite = finite && isfinite(c.value);
    if (better(c, best)) best = c;
  }
  finite = __syncthreads_and(finite);
  best = block_best(best, warps);
  if (threadIdx.x == 0) ids[blockIdx.x] = finite ? static_cast<int32_t>(best.index) : -1;
}

}  // namespace

template <typename T>
void argmax_rows(const T* x, int64_t rows, int64_t V, int32_t* ids) {
  if (rows == 0) return;
  launch_chained(argmax_rows_kernel<device_t<T>>, static_cast<unsigned>(rows), kThreads, 0, on_device(x), V, ids);
  check_launch("argmax_rows");
}

template void argmax_rows<float>(const float*, int64_t, int64_t, int32_t*);
template void argmax_rows<bfloat16>(const bfloat16*, int64_t, int64_t, int32_t*);
template void argmax_rows<float16>(const float16*, int64_t, int64_t, int32_t*);

}  // namespace tfm::cuda::launch

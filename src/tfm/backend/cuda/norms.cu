// RMSNorm, and the residual add fused before it: one block per row, the sum of squares reduced over the
// block.
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"

namespace tfm::cuda::launch {
namespace {

// out = weight * round(x * rsqrt(mean(x^2) + eps)) over row blockIdx.x. With `residual`, the row normalised
// is residual + x, rounded and stored back into residual first. Each thread rereads only what it wrote, so
// out may be x.
template <typename T>
__global__ void rms_norm_kernel(T* residual, const T* x, const T* weight, int64_t dim, float eps, T* out) {
  __shared__ float shared[32];
  const int64_t offset = blockIdx.x * dim;
  const T* row = residual ? residual + offset : x + offset;
  float sum = 0.f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = to_float(x[offset + i]);
    if (residual) {
      const T h = from_float<T>(to_float(residual[offset + i]) + v);
      residual[offset + i] = h;
      v = to_float(h);
    }
    sum += v * v;
  }
  sum = block_sum(sum, shared);
  const float inv = 1.f / sqrtf(sum / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[offset + i] = from_float<T>(to_float(weight[i]) * round_to<T>(to_float(row[i]) * inv));
}

}  // namespace

template <typename T>
void rms_norm(const T* x, const T* weight, int64_t rows, int64_t dim, float eps, T* out) {
  if (rows == 0 || dim == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(rows), threads_for_row(dim), 0, current_stream()>>>(
      static_cast<device_t<T>*>(nullptr), on_device(x), on_device(weight), dim, eps, on_device(out));
  check_launch("rms_norm");
}

template <typename T>
void add_rms_norm(T* residual, const T* x, const T* weight, int64_t rows, int64_t dim, float eps, T* out) {
  if (rows == 0 || dim == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(rows), threads_for_row(dim), 0, current_stream()>>>(
      on_device(residual), on_device(x), on_device(weight), dim, eps, on_device(out));
  check_launch("add_rms_norm");
}

#define TFM_NORM_LAUNCHERS(T)                                                 \
  template void rms_norm<T>(const T*, const T*, int64_t, int64_t, float, T*); \
  template void add_rms_norm<T>(T*, const T*, const T*, int64_t, int64_t, float, T*);
TFM_NORM_LAUNCHERS(float)
TFM_NORM_LAUNCHERS(bfloat16)
TFM_NORM_LAUNCHERS(float16)

}  // namespace tfm::cuda::launch

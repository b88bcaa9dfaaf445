// RMSNorm, and the residual add fused before it: rows.cuh's groups of lanes, the row in registers between the
// sum of squares and the scaling.
#include "tfm/backend/cuda/launchers.h"
#include "tfm/backend/cuda/rows.cuh"

namespace tfm::cuda::launch {
namespace {

// out = weight * round(x * rsqrt(mean(x^2) + eps)) for each row. With `residual`, the row normalised is
// residual + x, rounded and stored back into residual first. Every element is read before it is written, by
// the thread that writes it, so out may be x.
template <typename T, int kVecs>
__global__ void __launch_bounds__(row_block_limit(kVecs))
    rms_norm_kernel(T* residual, const T* x, const T* weight, int64_t rows, int64_t dim, float eps, int lanes,
                    bool wide, T* out) {
  __shared__ float shared[32];
  constexpr int E = Vec<T>::kSize;
  const RowGroup g(lanes);
  wait_for_previous_kernel();
  for (int64_t first = g.first_row(); first < rows; first += g.row_stride()) {
    const int64_t row = first + g.group, offset = row * dim, n = row < rows ? dim : 0;
    Vec<T> held[kVecs > 0 ? kVecs : 1];
    float sum = 0.f;
#pragma unroll
    for (int k = 0; kVecs > 0 ? k < kVecs : g.column<T>(k) < dim; ++k) {
      const int64_t c = g.column<T>(k);
      Vec<T> v = load_vec(x + offset, c, n, wide);
      if (residual) {
        const Vec<T> r = load_vec(residual + offset, c, n, wide);
#pragma unroll
        for (int e = 0; e < E; ++e) v.at[e] = from_float<T>(to_float(r.at[e]) + to_float(v.at[e]));
        store_vec(residual + offset, c, n, wide, v);
      }
#pragma unroll
      for (int e = 0; e < E; ++e) sum += to_float(v.at[e]) * to_float(v.at[e]);
      if constexpr (kVecs > 0) held[k] = v;
    }
    const float inv = 1.f / sqrtf(g.sum(sum, shared) / static_cast<float>(dim) + eps);
#pragma unroll
    for (int k = 0; kVecs > 0 ? k < kVecs : g.column<T>(k) < dim; ++k) {
      const int64_t c = g.column<T>(k);
      Vec<T> v;
      if constexpr (kVecs > 0)
        v = held[k];
      else
        v = load_vec((residual ? residual : x) + offset, c, n, wide);
      const Vec<T> w = load_vec(weight, c, n, wide);
#pragma unroll
      for (int e = 0; e < E; ++e) v.at[e] = from_float<T>(to_float(w.at[e]) * round_to<T>(to_float(v.at[e]) * inv));
      store_vec(out + offset, c, n, wide, v);
    }
  }
}

template <typename T>
void launch_rms_norm(device_t<T>* residual, const device_t<T>* x, const device_t<T>* weight, int64_t rows,
                     int64_t dim, float eps, device_t<T>* out, const char* op) {
  if (rows == 0 || dim == 0) return;
  constexpr int E = Vec<device_t<T>>::kSize;
  const bool wide = wide_access<T>(dim, x, weight, out) && (!residual || wide_access<T>(dim, residual));
  const RowLayout layout = row_layout(rows, (dim + E - 1) / E);
  with_row_vecs<kMaxRowVecs>(layout, [&](auto vecs) {
    const auto kernel = rms_norm_kernel<device_t<T>, decltype(vecs)::value>;
    const int64_t groups = layout.threads / layout.lanes;
    const auto blocks = static_cast<unsigned>(std::min<int64_t>((rows + groups - 1) / groups,
                                                                4 * resident_blocks(kernel, layout.threads, 0)));
    launch_chained(kernel, blocks, layout.threads, 0, residual, x, weight, rows, dim, eps, layout.lanes, wide, out);
  });
  check_launch(op);
}

}  // namespace

template <typename T>
void rms_norm(const T* x, const T* weight, int64_t rows, int64_t dim, float eps, T* out) {
  launch_rms_norm<T>(nullptr, on_device(x), on_device(weight), rows, dim, eps, on_device(out), "rms_norm");
}

template <typename T>
void add_rms_norm(T* residual, const T* x, const T* weight, int64_t rows, int64_t dim, float eps, T* out) {
  launch_rms_norm<T>(on_device(residual), on_device(x), on_device(weight), rows, dim, eps, on_device(out),
                     "add_rms_norm");
}

#define TFM_NORM_LAUNCHERS(T)                                                 \
  template void rms_norm<T>(const T*, const T*, int64_t, int64_t, float, T*); \
  template void add_rms_norm<T>(T*, const T*, const T*, int64_t, int64_t, float, T*);
TFM_NORM_LAUNCHERS(float)
TFM_NORM_LAUNCHERS(bfloat16)
TFM_NORM_LAUNCHERS(float16)

}  // namespace tfm::cuda::launch

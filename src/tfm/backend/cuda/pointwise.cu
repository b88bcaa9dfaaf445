// Elementwise kernels: add, cast, silu_mul and rope, one thread per element (per rotated pair for rope) in
// grid-stride loops, rounding as the CPU's kernels.cpp does.
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void add_kernel(T* x, const T* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    x[i] = from_float<T>(to_float(x[i]) + to_float(y[i]));
}

template <typename In, typename Out>
__global__ void cast_kernel(const In* x, Out* out, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = from_float<Out>(to_float(x[i]));
}

template <typename T>
__global__ void silu_mul_kernel(const T* gate_up, int64_t inter, int64_t n, T* out) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t row = i / inter, j = i % inter;
    const float gate = to_float(gate_up[row * 2 * inter + j]);
    out[i] = from_float<T>(round_to<T>(gate / (1.f + expf(-gate))) *
                           to_float(gate_up[row * 2 * inter + inter + j]));
  }
}

// Item i rotates the pair (x[p], x[p + half]) of one head of one row.
template <typename T>
__global__ void rope_kernel(T* x, const T* cos, const T* sin, int64_t heads, int64_t head_dim, int64_t rot,
                            int64_t n) {
  const int64_t half = rot / 2;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t p = i % half, head = i / half, row = head / heads;
    T* v = x + head * head_dim;
    const T* c = cos + row * rot;
    const T* s = sin + row * rot;
    const float x1 = to_float(v[p]), x2 = to_float(v[p + half]);
    v[p] = from_float<T>(round_to<T>(x1 * to_float(c[p])) + round_to<T>(-x2 * to_float(s[p])));
    v[p + half] =
        from_float<T>(round_to<T>(x2 * to_float(c[p + half])) + round_to<T>(x1 * to_float(s[p + half])));
  }
}

}  // namespace

template <typename T>
void add(T* x, const T* y, int64_t n) {
  if (n == 0) return;
  add_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(on_device(x), on_device(y), n);
  check_launch("add_");
}

template <typename In, typename Out>
void cast(const In* x, Out* out, int64_t n) {
  if (n == 0) return;
  cast_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(on_device(x), on_device(out), n);
  check_launch("cast");
}

template <typename T>
void silu_mul(const T* gate_up, int64_t rows, int64_t inter, T* out) {
  const int64_t n = rows * inter;
  if (n == 0) return;
  silu_mul_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(on_device(gate_up), inter, n, on_device(out));
  check_launch("silu_mul");
}

template <typename T>
void rope(T* x, const T* cos, const T* sin, int64_t rows, int64_t heads, int64_t head_dim, int64_t rot) {
  const int64_t n = rows * heads * (rot / 2);
  if (n == 0) return;
  rope_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(on_device(x), on_device(cos), on_device(sin), heads,
                                                   head_dim, rot, n);
  check_launch("rope_");
}

#define TFM_POINTWISE_LAUNCHERS(T)                               \
  template void add<T>(T*, const T*, int64_t);                   \
  template void cast<T, float>(const T*, float*, int64_t);       \
  template void cast<T, bfloat16>(const T*, bfloat16*, int64_t); \
  template void cast<T, float16>(const T*, float16*, int64_t);   \
  template void silu_mul<T>(const T*, int64_t, int64_t, T*);     \
  template void rope<T>(T*, const T*, const T*, int64_t, int64_t, int64_t, int64_t);
TFM_POINTWISE_LAUNCHERS(float)
TFM_POINTWISE_LAUNCHERS(bfloat16)
TFM_POINTWISE_LAUNCHERS(float16)

}  // namespace tfm::cuda::launch

// Elementwise kernels: add, cast, silu_mul and rope in grid-stride loops, rounding as the CPU's kernels.cpp
// does. All but cast take a 16-byte piece of each operand an item (device_common.cuh's load_vec: whole pieces
// of aligned tensors in one access, the rest element by element); cast, one element.
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void add_kernel(T* x, const T* y, int64_t n, bool wide) {
  wait_for_previous_kernel();
  constexpr int E = Vec<T>::kSize;
  for (int64_t i = first_index() * E; i < n; i += grid_stride() * E) {
    Vec<T> a = load_vec(x, i, n, wide);
    const Vec<T> b = load_vec(y, i, n, wide);
#pragma unroll
    for (int e = 0; e < E; ++e) a.at[e] = from_float<T>(to_float(a.at[e]) + to_float(b.at[e]));
    store_vec(x, i, n, wide, a);
  }
}

template <typename In, typename Out>
__global__ void cast_kernel(const In* x, Out* out, int64_t n) {
  wait_for_previous_kernel();
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = from_float<Out>(to_float(x[i]));
}

// Item i is a piece of row i / pieces of out.
template <typename T>
__global__ void silu_mul_kernel(const T* gate_up, int64_t inter, int64_t pieces, int64_t n, bool wide, T* out) {
  constexpr int E = Vec<T>::kSize;
  wait_for_previous_kernel();
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const auto [row, piece] = divide(i, pieces);
    const int64_t c = piece * E;
    const T* gate = gate_up + row * 2 * inter;
    const Vec<T> g = load_vec(gate, c, inter, wide), u = load_vec(gate + inter, c, inter, wide);
    Vec<T> o;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float v = to_float(g.at[e]);
      o.at[e] = from_float<T>(round_to<T>(v / (1.f + expf(-v))) * to_float(u.at[e]));
    }
    store_vec(out + row * inter, c, inter, wide, o);
  }
}

// Item i rotates a piece of the pairs (x[p], x[p + half]) of head i / pieces (of all rows' heads).
template <typename T>
__global__ void rope_kernel(T* x, const T* cos, const T* sin, int64_t heads, int64_t head_dim, int64_t rot,
                            int64_t pieces, int64_t n, bool wide) {
  wait_for_previous_kernel();
  constexpr int E = Vec<T>::kSize;
  const int64_t half = rot / 2;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const auto [head, piece] = divide(i, pieces);
    const int64_t p = piece * E, row = divide(head, heads).quotient;
    T* v = x + head * head_dim;
    const T* c = cos + row * rot;
    const T* s = sin + row * rot;
    Vec<T> x1 = load_vec(v, p, half, wide), x2 = load_vec(v + half, p, half, wide);
    const Vec<T> c1 = load_vec(c, p, half, wide), c2 = load_vec(c + half, p, half, wide);
    const Vec<T> s1 = load_vec(s, p, half, wide), s2 = load_vec(s + half, p, half, wide);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float a = to_float(x1.at[e]), b = to_float(x2.at[e]);
      x1.at[e] = from_float<T>(rotated<T>(a, b, to_float(c1.at[e]), to_float(s1.at[e]), true));
      x2.at[e] = from_float<T>(rotated<T>(b, a, to_float(c2.at[e]), to_float(s2.at[e]), false));
    }
    store_vec(v, p, half, wide, x1);
    store_vec(v + half, p, half, wide, x2);
  }
}

}  // namespace

template <typename T>
void add(T* x, const T* y, int64_t n) {
  if (n == 0) return;
  const int64_t pieces = (n + Vec<device_t<T>>::kSize - 1) / Vec<device_t<T>>::kSize;
  launch_chained(add_kernel<device_t<T>>, grid_for(pieces, kThreads), kThreads, 0, on_device(x), on_device(y),
                 n, wide_access<T>(0, x, y));
  check_launch("add_");
}

template <typename In, typename Out>
void cast(const In* x, Out* out, int64_t n) {
  if (n == 0) return;
  launch_chained(cast_kernel<device_t<In>, device_t<Out>>, grid_for(n, kThreads), kThreads, 0, on_device(x),
                 on_device(out), n);
  check_launch("cast");
}

template <typename T>
void silu_mul(const T* gate_up, int64_t rows, int64_t inter, T* out) {
  const int64_t pieces = (inter + Vec<device_t<T>>::kSize - 1) / Vec<device_t<T>>::kSize, n = rows * pieces;
  if (n == 0) return;
  launch_chained(silu_mul_kernel<device_t<T>>, grid_for(n, kThreads), kThreads, 0, on_device(gate_up), inter, pieces, n,
                 wide_access<T>(inter, gate_up, out), on_device(out));
  check_launch("silu_mul");
}

template <typename T>
void rope(T* x, const T* cos, const T* sin, int64_t rows, int64_t heads, int64_t head_dim, int64_t rot) {
  const int64_t half = rot / 2, pieces = (half + Vec<device_t<T>>::kSize - 1) / Vec<device_t<T>>::kSize;
  const int64_t n = rows * heads * pieces;
  if (n == 0) return;
  const bool wide = wide_access<T>(half, x, cos, sin) && wide_access<T>(head_dim);
  launch_chained(rope_kernel<device_t<T>>, grid_for(n, kThreads), kThreads, 0, on_device(x), on_device(cos),
                 on_device(sin), heads, head_dim, rot, pieces, n, wide);
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

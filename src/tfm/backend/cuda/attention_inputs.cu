// Attention's inputs in one pass over the fused projection's output, and the pass back. q and k heads are
// normalized (when the model has q/k norms) and rotated with the roundings of rms_norm and rope_; q heads go
// to q, k and v heads straight into the paged cache (a training step's to k and v). Decode runs this in place
// of six launches a layer; a training step's backward takes the gradients back through the rotation and the
// norms into the projection's output gradient in one pass too, in place of five.
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/head_lanes.cuh"
#include "tfm/backend/cuda/launchers.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kLanesThreads = 128;

// A group of lanes a (row, head) in 16-byte pieces (head_lanes), for head sizes 64, 128 and 256 whose rotary
// half is whole lanes' dimensions. A prefill's thousands of rows made one block a head with a thread an
// element, each block's loads issued one at a time and waited on at a barrier: ~7x the bytes' time.
template <typename T, int D>
__global__ void __launch_bounds__(kLanesThreads) qkv_rope_cache_lanes_kernel(QkvRopeCacheArgs a) {
  constexpr int kLanes = head_lanes(sizeof(T), D).lanes, kDims = head_lanes(sizeof(T), D).dims;
  constexpr int kPieces = kDims * sizeof(T) / 16;
  wait_for_previous_kernel();
  const int64_t kv = a.kv_heads, heads = a.heads + 2 * kv;
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * (kLanesThreads / kLanes) + threadIdx.x / kLanes;
  if (pair >= a.rows * heads) return;  // the whole group
  const auto [t, j] = divide(pair, heads);
  const int64_t slot = a.slots ? a.slots[t] : t;
  const int sub = threadIdx.x % kLanes;
  const T* x = static_cast<const T*>(a.qkv) + pair * D;
  const bool is_q = j < a.heads, is_k = !is_q && j < a.heads + kv;
  if (!is_q && slot < 0) return;  // a padding row's k and v go nowhere
  uint4 pieces[kPieces];
  if (is_q || is_k) {
    float v[kDims];
    load_dims<T, kDims>(x, sub, v);
    normalise_and_rotate<T, kLanes>(a, t, is_q ? a.q_norm : a.k_norm, sub, v);
    pack_dims<T>(v, pieces);
  } else {
    load_pieces<T, kDims>(x, sub, pieces);
  }
  T* out = is_q   ? static_cast<T*>(a.q) + (t * a.heads + j) * D
           : is_k ? static_cast<T*>(a.cache_k) + (slot * kv + j - a.heads) * D
                  : static_cast<T*>(a.cache_v) + (slot * kv + j - a.heads - kv) * D;
  store_pieces<T, kDims>(out, sub, pieces);
}

// One block per (row, head of q, k or v), one thread per dimension: any head size up to 1,024.
template <typename T>
__global__ void qkv_rope_cache_kernel(QkvRopeCacheArgs a) {
  extern __shared__ float values[];  // head_dim
  __shared__ float shared[32];
  wait_for_previous_kernel();
  const int64_t t = blockIdx.x, j = blockIdx.y, D = a.head_dim, kv = a.kv_heads;
  const int64_t slot = a.slots ? a.slots[t] : t;
  const int64_t d = threadIdx.x;
  const T* x = static_cast<const T*>(a.qkv) + t * (a.heads + 2 * kv) * D + j * D;
  if (j >= a.heads + kv) {  // a v head
    if (slot >= 0 && d < D) static_cast<T*>(a.cache_v)[(slot * kv + j - a.heads - kv) * D + d] = x[d];
    return;
  }
  const bool is_q = j < a.heads;
  const T* norm = static_cast<const T*>(is_q ? a.q_norm : a.k_norm);
  // Every load is issued before the first barrier, so that the block waits out one memory latency, not three.
  const bool in_rotation = d < a.rot;
  float v = d < D ? to_float(x[d]) : 0.f;
  const float weight = norm && d < D ? to_float(norm[d]) : 0.f;
  const float cos_d = in_rotation ? to_float(static_cast<const T*>(a.cos)[t * a.rot + d]) : 0.f;
  const float sin_d = in_rotation ? to_float(static_cast<const T*>(a.sin)[t * a.rot + d]) : 0.f;
  if (norm) {
    const float inv = 1.f / sqrtf(block_sum(v * v, shared) / static_cast<float>(D) + a.eps);
    if (d < D) v = round_to<T>(weight * round_to<T>(v * inv));
  }
  if (d < D) values[d] = v;
  __syncthreads();
  if (d >= D) return;
  const int64_t half = a.rot / 2;
  if (in_rotation) v = rotated<T>(v, values[d < half ? d + half : d - half], cos_d, sin_d, d < half);
  if (is_q) {
    static_cast<T*>(a.q)[(t * a.heads + j) * D + d] = from_float<T>(v);
  } else if (slot >= 0) {
    static_cast<T*>(a.cache_k)[(slot * kv + j - a.heads) * D + d] = from_float<T>(v);
  }
}

// qkv_rope's backward, a group of lanes a (row, head) as qkv_rope_cache_lanes_kernel: a q or k head's
// gradient rotated back and taken through its norm, a v head's copied. The blocks loop over the heads, each
// summing the norms' weight gradients over the heads it visits before one atomic an element (q and k norms
// have a row per token and head).
template <typename T, int D>
__global__ void __launch_bounds__(kLanesThreads) qkv_rope_backward_lanes_kernel(QkvRopeBackwardArgs a) {
  wait_for_previous_kernel();
  constexpr int kLanes = head_lanes(sizeof(T), D).lanes, kDims = head_lanes(sizeof(T), D).dims;
  constexpr int kPieces = kDims * sizeof(T) / 16, kGroups = kLanesThreads / kLanes;
  __shared__ float block_sums[2][D];  // of dq_norm and dk_norm
  const int64_t kv = a.kv_heads, heads = a.heads + 2 * kv, pairs = a.rows * heads;
  const int sub = threadIdx.x % kLanes;
  float dweight[2][kDims] = {};  // [0]: q's norm, [1]: k's
  for (int64_t pair = static_cast<int64_t>(blockIdx.x) * kGroups + threadIdx.x / kLanes; pair < pairs;
       pair += static_cast<int64_t>(gridDim.x) * kGroups) {
    const auto [t, j] = divide(pair, heads);
    T* out = static_cast<T*>(a.dqkv) + pair * D;
    uint4 pieces[kPieces];
    if (j >= a.heads + kv) {
      load_pieces<T, kDims>(static_cast<const T*>(a.dv) + (t * kv + j - a.heads - kv) * D, sub, pieces);
      store_pieces<T, kDims>(out, sub, pieces);
      continue;
    }
    const int n = j < a.heads ? 0 : 1;
    // The norm's weight comes from the cache at each use (held, with the sums, it halved the blocks that
    // fit); the head's input is loaded with its gradient, so that the group waits on memory once.
    const T* norm = static_cast<const T*>(n == 0 ? a.q_norm : a.k_norm);
    float g[kDims], x[kDims];
    load_dims<T, kDims>(n == 0 ? static_cast<const T*>(a.dq) + (t * a.heads + j) * D
                               : static_cast<const T*>(a.dk) + (t * kv + j - a.heads) * D,
                        sub, g);
    if (norm) load_dims<T, kDims>(static_cast<const T*>(a.qkv) + pair * D, sub, x);
    rotate<T, kLanes>(static_cast<const T*>(a.cos) + t * a.rot, static_cast<const T*>(a.sin) + t * a.rot,
                      a.rot, sub, g);
    if (norm) {
      norm += sub * kDims;
      float squares = 0.f;
#pragma unroll
      for (int i = 0; i < kDims; ++i) squares += x[i] * x[i];
      const float inv = 1.f / sqrtf(group_sum<kLanes>(squares) / static_cast<float>(D) + a.eps);
      float dot = 0.f;  // of dout * weight and the normalised x
#pragma unroll
      for (int i = 0; i < kDims; ++i) {
        const float w = to_float(norm[i]), normalised = x[i] * inv;
        dot += g[i] * w * normalised;
        (n == 0 ? dweight[0][i] : dweight[1][i]) += g[i] * round_to<T>(normalised);
      }
      const float mean = group_sum<kLanes>(dot) / static_cast<float>(D);
#pragma unroll
      for (int i = 0; i < kDims; ++i) g[i] = (g[i] * to_float(norm[i]) - x[i] * inv * mean) * inv;
    }
    pack_dims<T>(g, pieces);
    store_pieces<T, kDims>(out, sub, pieces);
  }
  if (!a.dq_norm && !a.dk_norm) return;
  for (int i = threadIdx.x; i < 2 * D; i += blockDim.x) block_sums[i / D][i % D] = 0.f;
  __syncthreads();
  for (int n = 0; n < 2; ++n) {
#pragma unroll
    for (int i = 0; i < kDims; ++i) atomicAdd(&block_sums[n][sub * kDims + i], dweight[n][i]);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    if (a.dq_norm) atomicAdd(a.dq_norm + i, block_sums[0][i]);
    if (a.dk_norm) atomicAdd(a.dk_norm + i, block_sums[1][i]);
  }
}

// One block per (row, head of q, k or v), one thread per dimension: any head size up to 1,024, each row
// adding its norm weight terms atomically.
template <typename T>
__global__ void qkv_rope_backward_kernel(QkvRopeBackwardArgs a) {
  wait_for_previous_kernel();
  extern __shared__ float values[];  // head_dim
  __shared__ float shared[32];
  const int64_t t = blockIdx.x, j = blockIdx.y, D = a.head_dim, kv = a.kv_heads, d = threadIdx.x;
  T* out = static_cast<T*>(a.dqkv) + (t * (a.heads + 2 * kv) + j) * D;
  if (j >= a.heads + kv) {  // a v head
    if (d < D) out[d] = static_cast<const T*>(a.dv)[(t * kv + j - a.heads - kv) * D + d];
    return;
  }
  const bool is_q = j < a.heads;
  const T* grad = is_q ? static_cast<const T*>(a.dq) + (t * a.heads + j) * D
                       : static_cast<const T*>(a.dk) + (t * kv + j - a.heads) * D;
  const T* norm = static_cast<const T*>(is_q ? a.q_norm : a.k_norm);
  float g = d < D ? to_float(grad[d]) : 0.f;
  if (d < D) values[d] = g;
  __syncthreads();
  const int64_t half = a.rot / 2;
  if (d < a.rot) {
    const float c = to_float(static_cast<const T*>(a.cos)[t * a.rot + d]);
    const float s = to_float(static_cast<const T*>(a.sin)[t * a.rot + d]);
    g = round_to<T>(rotated<T>(g, values[d < half ? d + half : d - half], c, s, d < half));
  }
  if (norm) {
    const float x =
        d < D ? to_float(static_cast<const T*>(a.qkv)[(t * (a.heads + 2 * kv) + j) * D + d]) : 0.f;
    const float w = d < D ? to_float(norm[d]) : 0.f;
    const float inv = 1.f / sqrtf(block_sum(x * x, shared) / static_cast<float>(D) + a.eps);
    const float mean = block_sum(g * w * x * inv, shared) / static_cast<float>(D);
    float* dweight = is_q ? a.dq_norm : a.dk_norm;
    if (dweight && d < D) atomicAdd(dweight + d, g * round_to<T>(x * inv));
    g = (g * w - x * inv * mean) * inv;
  }
  if (d < D) out[d] = from_float<T>(g);
}

}  // namespace

template <typename T>
void qkv_rope_cache(const QkvRopeCacheArgs& a) {
  if (a.rows == 0) return;
  if (lanes_rotate(sizeof(T), a.head_dim, a.rot) && wide_access<T>(0, a.qkv, a.q, a.cache_k, a.cache_v)) {
    with_head_dim(a.head_dim, [&](auto d) {
      constexpr int kGroups = kLanesThreads / head_lanes(sizeof(T), d()).lanes;
      const int64_t blocks = (a.rows * (a.heads + 2 * a.kv_heads) + kGroups - 1) / kGroups;
      launch_chained(qkv_rope_cache_lanes_kernel<device_t<T>, d()>, dim3(static_cast<unsigned>(blocks)),
                     kLanesThreads, 0, a);
    });
    check_launch("qkv_rope_cache (lanes)");
    return;
  }
  if (a.head_dim > 1024) throw_error("CUDA kernel qkv_rope_cache: head_dim ", a.head_dim, " is over 1024");
  const dim3 grid(static_cast<unsigned>(a.rows), static_cast<unsigned>(a.heads + 2 * a.kv_heads));
  const size_t shared = static_cast<size_t>(a.head_dim) * sizeof(float);
  launch_chained(qkv_rope_cache_kernel<device_t<T>>, grid, threads_for_row(a.head_dim), shared, a);
  check_launch("qkv_rope_cache");
}

template <typename T>
void qkv_rope_backward(const QkvRopeBackwardArgs& a) {
  if (a.rows == 0) return;
  if (lanes_rotate(sizeof(T), a.head_dim, a.rot) && wide_access<T>(0, a.qkv, a.dq, a.dk, a.dv, a.dqkv)) {
    with_head_dim(a.head_dim, [&](auto d) {
      const auto kernel = qkv_rope_backward_lanes_kernel<device_t<T>, d()>;
      constexpr int kGroups = kLanesThreads / head_lanes(sizeof(T), d()).lanes;
      const int64_t needed = (a.rows * (a.heads + 2 * a.kv_heads) + kGroups - 1) / kGroups;
      // As many blocks as the device holds at once, each looping over heads (one atomic a norm element a
      // block).
      const auto blocks =
          static_cast<unsigned>(std::min<int64_t>(needed, resident_blocks(kernel, kLanesThreads, 0)));
      launch_chained(kernel, blocks, kLanesThreads, 0, a);
    });
    check_launch("qkv_rope_backward (lanes)");
    return;
  }
  if (a.head_dim > 1024) throw_error("CUDA kernel qkv_rope_backward: head_dim ", a.head_dim, " is over 1024");
  const dim3 grid(static_cast<unsigned>(a.rows), static_cast<unsigned>(a.heads + 2 * a.kv_heads));
  launch_chained(qkv_rope_backward_kernel<device_t<T>>, grid, threads_for_row(a.head_dim),
                 static_cast<size_t>(a.head_dim) * sizeof(float), a);
  check_launch("qkv_rope_backward");
}

template void qkv_rope_cache<float>(const QkvRopeCacheArgs&);
template void qkv_rope_cache<bfloat16>(const QkvRopeCacheArgs&);
template void qkv_rope_cache<float16>(const QkvRopeCacheArgs&);
template void qkv_rope_backward<float>(const QkvRopeBackwardArgs&);
template void qkv_rope_backward<bfloat16>(const QkvRopeBackwardArgs&);
template void qkv_rope_backward<float16>(const QkvRopeBackwardArgs&);

}  // namespace tfm::cuda::launch

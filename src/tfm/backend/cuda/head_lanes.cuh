// A head held by a group of lanes: each lane of the group holds `dims` consecutive dimensions of it, in whole
// 16-byte pieces, so that a head loads and stores in the widest accesses and a lane's dimensions are
// registers. The split-rows decode attention holds its queries and keys so; qkv_rope_cache and
// op::QkvAttention make q and k heads so (norm by shuffles across the group, each dimension's rotary partner
// by a shuffle).
#pragma once

#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"

namespace tfm::cuda::launch {

struct HeadLanes {
  int lanes, dims;
};
__host__ __device__ constexpr HeadLanes head_lanes(int element_bytes, int head_dim) {
  const int piece = 16 / element_bytes, pieces = head_dim / piece, lanes = pieces < 32 ? pieces : 32;
  return {lanes, pieces / lanes * piece};
}

// The head sizes laid over lanes: whole pieces on 32 lanes or fewer, for every element size. The attention
// tiles take the same sizes.
inline bool lanes_hold(int64_t head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

// Calls `launch` with head_dim, one that lanes_hold, as a compile-time constant.
template <typename Launch>
void with_head_dim(int64_t head_dim, Launch&& launch) {
  with_constant<64, 128, 256>(head_dim, launch);
}

// Whether the rotary half is whole lanes' dimensions, so that a dimension's partner is the same element of
// another lane of the group.
inline bool lanes_rotate(int element_bytes, int64_t head_dim, int64_t rot) {
  const int dims = head_lanes(element_bytes, static_cast<int>(head_dim)).dims;
  return lanes_hold(head_dim) && rot <= head_dim && (rot / 2) % dims == 0;
}

// The lanes of this lane's group of kLanes, for shuffles that stay within it.
template <int kLanes>
__device__ unsigned group_mask() {
  if constexpr (kLanes == 32) {
    return 0xffffffffu;
  } else {
    return ((1u << kLanes) - 1) << (threadIdx.x % 32 / kLanes * kLanes);
  }
}

// Lane `sub`'s kDims dimensions of a head (from sub * kDims on), as the 16-byte pieces they are stored in.
template <typename T, int kDims>
__device__ void load_pieces(const T* head, int sub, uint4 (&pieces)[kDims * sizeof(T) / 16]) {
#pragma unroll
  for (int p = 0; p < kDims * static_cast<int>(sizeof(T)) / 16; ++p)
    pieces[p] = reinterpret_cast<const uint4*>(head + sub * kDims)[p];
}
template <typename T, int kDims>
__device__ void store_pieces(T* head, int sub, const uint4 (&pieces)[kDims * sizeof(T) / 16]) {
#pragma unroll
  for (int p = 0; p < kDims * static_cast<int>(sizeof(T)) / 16; ++p)
    reinterpret_cast<uint4*>(head + sub * kDims)[p] = pieces[p];
}

// Lane `sub`'s kDims dimensions of a head as floats, from 16-byte loads.
template <typename T, int kDims>
__device__ void load_dims(const T* head, int sub, float (&out)[kDims]) {
  constexpr int kPiece = 16 / sizeof(T);
  uint4 pieces[kDims / kPiece];
  load_pieces<T, kDims>(head, sub, pieces);
#pragma unroll
  for (int p = 0; p < kDims / kPiece; ++p) {
    const T* values = reinterpret_cast<const T*>(&pieces[p]);
#pragma unroll
    for (int e = 0; e < kPiece; ++e) out[p * kPiece + e] = to_float(values[e]);
  }
}

// kDims floats that hold values of T, as the 16-byte pieces of T they came from.
template <typename T, int kDims>
__device__ void pack_dims(const float (&v)[kDims], uint4 (&pieces)[kDims * sizeof(T) / 16]) {
  constexpr int kPiece = 16 / sizeof(T);
#pragma unroll
  for (int p = 0; p < kDims / kPiece; ++p) {
    T* values = reinterpret_cast<T*>(&pieces[p]);
#pragma unroll
    for (int e = 0; e < kPiece; ++e) values[e] = from_float<T>(v[p * kPiece + e]);
  }
}

// The sum of a value of each lane of this lane's group, on every lane of it.
template <int kLanes>
__device__ float group_sum(float v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(group_mask<kLanes>(), v, offset);
  return v;
}

// A head's RMSNorm by the group holding it (lane `sub` its kDims dimensions, `norm` the weight), rounded as
// rms_norm rounds.
template <typename T, int kLanes, int kDims>
__device__ void normalise(const T* norm, float eps, int sub, float (&v)[kDims]) {
  float squares = 0.f;
#pragma unroll
  for (int i = 0; i < kDims; ++i) squares += v[i] * v[i];
  const float inv = 1.f / sqrtf(group_sum<kLanes>(squares) / static_cast<float>(kLanes * kDims) + eps);
  norm += sub * kDims;
#pragma unroll
  for (int i = 0; i < kDims; ++i) v[i] = round_to<T>(to_float(norm[i]) * round_to<T>(v[i] * inv));
}

// A head rotated by the group holding it, by a row of cos and sin (rot of them), each dimension's rotary
// partner from another lane of the group by a shuffle; rounded to T as rope_ rounds. The host saw to it that
// the lanes rotate (lanes_rotate).
template <typename T, int kLanes, int kDims>
__device__ void rotate(const T* cos_row, const T* sin_row, int64_t rot, int sub, float (&v)[kDims]) {
  const int64_t half = rot / 2, first = static_cast<int64_t>(sub) * kDims;
  const bool in_rotation = first < rot, first_half = first < half;
  const int lane = threadIdx.x % 32, shift = static_cast<int>(half / kDims);
  const int partner = !in_rotation ? lane : first_half ? lane + shift : lane - shift;
#pragma unroll
  for (int i = 0; i < kDims; ++i) {
    const float other = __shfl_sync(group_mask<kLanes>(), v[i], partner);
    if (in_rotation)
      v[i] = round_to<T>(
          rotated<T>(v[i], other, to_float(cos_row[first + i]), to_float(sin_row[first + i]), first_half));
  }
}

// A q or k head of row `row` of the fused projection made as qkv_rope_cache makes it: normalised with `norm`
// (when there is one) and rotated. Every lane of the group calls this together.
template <typename T, int kLanes, int kDims>
__device__ void normalise_and_rotate(const QkvRopeCacheArgs& in, int64_t row, const void* norm_weight,
                                     int sub, float (&v)[kDims]) {
  if (norm_weight) normalise<T, kLanes>(static_cast<const T*>(norm_weight), in.eps, sub, v);
  rotate<T, kLanes>(static_cast<const T*>(in.cos) + row * in.rot,
                    static_cast<const T*>(in.sin) + row * in.rot, in.rot, sub, v);
}

}  // namespace tfm::cuda::launch

// The 16-bit float formats as storage (their bits), with conversions to and from float32 that round to
// nearest even, as torch rounds. Host kernels read elements through to_float and write them through
// from_float<T>, so one kernel template serves float32, bfloat16 and float16.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "tfm/core/dtype.h"
#include "tfm/core/error.h"

namespace tfm {

struct bfloat16 {
  uint16_t bits;
};
struct float16 {
  uint16_t bits;
};

inline float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

inline float bf16_to_float(uint16_t h) {
  return bits_to_float(static_cast<uint32_t>(h) << 16);
}
// NaN stays NaN (a quiet one).
inline uint16_t float_to_bf16(float f) {
  uint32_t bits = float_to_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t bits = static_cast<uint32_t>(h & 0x7fffu) << 13;  // exponent and mantissa in float32's places
  const uint32_t exponent = bits & 0x0f800000u;
  bits += (127u - 15u) << 23;                     // rebias the exponent
  if (exponent == 0x0f800000u) {                  // infinity or NaN: the exponent stays all ones
    bits += (128u - 16u) << 23;
  } else if (exponent == 0) {                     // zero or subnormal: 2^-14 (1 + m/1024) - 2^-14 = m 2^-24
    bits = float_to_bits(bits_to_float(bits + (1u << 23)) - 6.103515625e-05f);
  }
  return bits_to_float(bits | sign);
}
inline uint16_t float_to_fp16(float f) {
  const uint32_t bits = float_to_bits(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: infinity
  if (abs < 0x38800000u) {  // below 2^-14: added to 0.5, whose ulp is 2^-24, float addition rounds it
    const float sum = bits_to_float(abs) + 0.5f;
    return static_cast<uint16_t>(sign | (float_to_bits(sum) - 0x3f000000u));
  }
  return static_cast<uint16_t>(sign | ((abs + 0xfffu + ((abs >> 13) & 1u) - 0x38000000u) >> 13));
}

inline float to_float(float v) {
  return v;
}
inline float to_float(bfloat16 v) {
  return bf16_to_float(v.bits);
}
inline float to_float(float16 v) {
  return fp16_to_float(v.bits);
}

template <typename T>
T from_float(float v);
template <>
inline float from_float<float>(float v) {
  return v;
}
template <>
inline bfloat16 from_float<bfloat16>(float v) {
  return {float_to_bf16(v)};
}
template <>
inline float16 from_float<float16>(float v) {
  return {float_to_fp16(v)};
}

// `v` rounded to T's precision and back: where torch stores an intermediate result in the tensor's dtype.
template <typename T>
float round_to(float v) {
  return to_float(from_float<T>(v));
}

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::float32;
}
template <>
constexpr DType dtype_of<bfloat16>() {
  return DType::bfloat16;
}
template <>
constexpr DType dtype_of<float16>() {
  return DType::float16;
}

// The dtypes models compute in.
inline constexpr DType kComputeDTypes[] = {DType::float32, DType::bfloat16, DType::float16};

// Calls f.template operator()<T>() with T the storage type of `d`, one of kComputeDTypes.
template <typename F>
decltype(auto) visit_float(DType d, F&& f) {
  switch (d) {
    case DType::float32:
      return std::forward<F>(f).template operator()<float>();
    case DType::bfloat16:
      return std::forward<F>(f).template operator()<bfloat16>();
    case DType::float16:
      return std::forward<F>(f).template operator()<float16>();
    default:
      throw_error(dtype_name(d), " is not a dtype models compute in (float32, bfloat16, float16)");
  }
}

}  // namespace tfm

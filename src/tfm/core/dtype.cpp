#include "tfm/core/dtype.h"

#include <array>
#include <cmath>

#include "tfm/core/error.h"

namespace tfm {
namespace {

struct DTypeInfo {
  DType type;
  size_t size;
  std::string_view name;
  std::string_view safetensors;
};

constexpr std::array<DTypeInfo, 20> kInfo = {{
    {DType::float64, 8, "float64", "F64"},
    {DType::float32, 4, "float32", "F32"},
    {DType::bfloat16, 2, "bfloat16", "BF16"},
    {DType::float16, 2, "float16", "F16"},
    {DType::float8_e4m3fn, 1, "float8_e4m3fn", "F8_E4M3"},
    {DType::float8_e5m2, 1, "float8_e5m2", "F8_E5M2"},
    {DType::int64, 8, "int64", "I64"},
    {DType::int32, 4, "int32", "I32"},
    {DType::int16, 2, "int16", "I16"},
    {DType::int8, 1, "int8", "I8"},
    {DType::uint64, 8, "uint64", "U64"},
    {DType::uint32, 4, "uint32", "U32"},
    {DType::uint16, 2, "uint16", "U16"},
    {DType::uint8, 1, "uint8", "U8"},
    {DType::bool_, 1, "bool", "BOOL"},
    {DType::uint4x2, 1, "uint4x2", ""},
    {DType::float8_e8m0fnu, 1, "float8_e8m0fnu", "F8_E8M0"},
    {DType::float8_e4m3fnuz, 1, "float8_e4m3fnuz", "F8_E4M3FNUZ"},
    {DType::float8_e5m2fnuz, 1, "float8_e5m2fnuz", "F8_E5M2FNUZ"},
    {DType::complex64, 8, "complex64", "C64"},
}};

const DTypeInfo& info(DType t) {
  return kInfo[static_cast<size_t>(t)];
}

}  // namespace

size_t dtype_size(DType t) {
  return info(t).size;
}

bool is_floating(DType t) {
  return t == DType::float64 || t == DType::float32 || t == DType::bfloat16 || t == DType::float16 ||
         t == DType::float8_e4m3fn || t == DType::float8_e5m2 || t == DType::float8_e8m0fnu ||
         t == DType::float8_e4m3fnuz || t == DType::float8_e5m2fnuz;
}

std::string_view dtype_name(DType t) {
  return info(t).name;
}

DType parse_dtype(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  if (name == "float") return DType::float32;
  if (name == "half") return DType::float16;
  if (name == "double") return DType::float64;
  for (const auto& i : kInfo) {
    if (i.name == name) return i.type;
  }
  throw_error("unknown dtype '", name, "'");
}

std::string_view safetensors_dtype_name(DType t) {
  return info(t).safetensors;
}

bool parse_safetensors_dtype(std::string_view code, DType* out) {
  for (const auto& i : kInfo) {
    if (!i.safetensors.empty() && i.safetensors == code) {
      *out = i.type;
      return true;
    }
  }
  return false;
}

float fp16_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  float value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    value = mantissa ? NAN : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  }
  return sign ? -value : value;
}

uint16_t float_to_fp16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {                                               // subnormal or zero
    const float magnitude = std::fabs(f);
    const uint32_t m = static_cast<uint32_t>(std::nearbyint(std::ldexp(magnitude, 24)));
    return static_cast<uint16_t>(sign | m);
  }
  // Normal: rebias the exponent and round the mantissa to nearest even.
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

}  // namespace tfm

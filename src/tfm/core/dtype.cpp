#include "tfm/core/dtype.h"

#include <array>

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

}  // namespace tfm

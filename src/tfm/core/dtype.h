// Element types, named as torch names them ("float32", "bfloat16", ...), with the safetensors codes beside.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tfm {

enum class DType : uint8_t {
  float64,
  float32,
  bfloat16,
  float16,
  float8_e4m3fn,
  float8_e5m2,
  int64,
  int32,
  int16,
  int8,
  uint64,
  uint32,
  uint16,
  uint8,
  bool_,
  uint4x2,  // packed 4-bit codes, two per byte (bitsandbytes NF4/FP4 weights)
  float8_e8m0fnu,
  float8_e4m3fnuz,
  float8_e5m2fnuz,
  complex64,
};

// Bytes per element; uint4x2 counts one byte per two codes and reports 1 here (its shape counts bytes).
size_t dtype_size(DType t);
bool is_floating(DType t);
// torch's name: "float32", "bfloat16", "bool".
std::string_view dtype_name(DType t);
// Accepts torch names with or without "torch." ("torch.bfloat16", "bf16" is not accepted), and Python aliases
// Transformers writes in config.json ("float", "half").
DType parse_dtype(std::string_view name);
// safetensors codes: "F32", "BF16", "I64", "BOOL", ...
std::string_view safetensors_dtype_name(DType t);
bool parse_safetensors_dtype(std::string_view code, DType* out);

}  // namespace tfm

// Random tensors for the kernel tests: values drawn in float32, stored in the dtype under test.
#pragma once

#include <random>

#include "tfm/core/tensor.h"
#include "tfm/ops/ops.h"

namespace tfm::test_support {

// Random values in [-1, 1) rounded to `dtype` by the CPU's cast, on the CPU.
inline Tensor random_tensor(const Shape& shape, DType dtype, std::mt19937& rng) {
  Tensor values = Tensor::cpu(shape, DType::float32);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int64_t i = 0; i < values.numel(); ++i) values.data<float>()[i] = dist(rng);
  Tensor stored = Tensor::cpu(shape, dtype);
  ops::cast(values, stored);
  return stored;
}

}  // namespace tfm::test_support

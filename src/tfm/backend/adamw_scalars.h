// The per-element scalars of one AdamW step (op_set.h's op::AdamW), as every backend's kernel takes them: each
// computed in double from torch's Python-float hyperparameters and rounded to float32 once, so that every
// device rounds them alike. Kept to C++17 so that .cu files can include it.
#pragma once

#include <cmath>
#include <cstdint>

namespace tfm {

struct AdamWScalars {
  float grad_scale, decay, one_minus_beta1, beta2, one_minus_beta2, step_size, bias2_sqrt, eps;
};

inline AdamWScalars adamw_scalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                                  double grad_scale, int64_t step) {
  const double bias1 = 1. - std::pow(beta1, static_cast<double>(step));
  const double bias2 = 1. - std::pow(beta2, static_cast<double>(step));
  const auto f = [](double v) { return static_cast<float>(v); };
  return {f(grad_scale), f(1. - lr * weight_decay), f(1. - beta1), f(beta2),
          f(1. - beta2), f(lr / bias1),             f(std::sqrt(bias2)), f(eps)};
}

}  // namespace tfm

// The matmul rate of tfm's linear and linear_backward on one device, by shape: the median time of REPEAT
// calls after a warm-up, as TFLOP/s. Each shape is M K N: x (M, K) @ w (N, K)^T; the backward computes
// dx = dy @ w and dw += dy^T @ x (dw in float32, as training keeps it).
//
//   matmul_bench [DEVICE] [DTYPE] [REPEAT] [M K N]...   defaults: cuda:0 bfloat16 20, the Qwen3-0.6B shape's
//                                                       training matmuls at 8,192 tokens
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "device_timing.h"
#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/ops/ops.h"

using tfm::bench::median_seconds;

int main(int argc, char** argv) try {
  const tfm::Device device = tfm::resolve_device(argc > 1 ? argv[1] : "cuda:0");
  const tfm::DType dtype = tfm::parse_dtype(argc > 2 ? argv[2] : "bfloat16");
  const int repeat = argc > 3 ? std::stoi(argv[3]) : 20;
  std::vector<int64_t> dims;
  for (int i = 4; i < argc; ++i) dims.push_back(std::stoll(argv[i]));
  if (dims.empty()) dims = {8192, 1024, 4096, 8192, 2048, 1024, 8192, 1024, 6144, 8192, 3072, 1024, 8192, 1024, 151936};
  tfm::check(repeat > 0 && dims.size() % 3 == 0 && std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d > 0; }),
             "usage: matmul_bench [DEVICE] [DTYPE] [REPEAT] [M K N]..., every number positive");
  std::printf("%8s %8s %8s %12s %12s\n", "M", "K", "N", "linear", "backward");
  for (size_t i = 0; i < dims.size(); i += 3) {
    const int64_t M = dims[i], K = dims[i + 1], N = dims[i + 2];
    const tfm::Tensor x = tfm::empty({M, K}, dtype, device), w = tfm::empty({N, K}, dtype, device);
    tfm::Tensor y = tfm::empty({M, N}, dtype, device), dx = tfm::empty({M, K}, dtype, device);
    tfm::Tensor dw = tfm::empty({N, K}, tfm::DType::float32, device), no_bias;
    for (const tfm::Tensor* t : std::initializer_list<const tfm::Tensor*>{&x, &w, &y, &dx, &dw}) tfm::zero(*t);
    const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(K) * static_cast<double>(N);
    const double forward = median_seconds(device, repeat, [&] { tfm::ops::linear(x, w, no_bias, y); });
    const double backward =
        median_seconds(device, repeat, [&] { tfm::ops::linear_backward(x, w, y, dx, dw, no_bias); });
    std::printf("%8lld %8lld %8lld %7.1f TF/s %7.1f TF/s\n", static_cast<long long>(M), static_cast<long long>(K),
                static_cast<long long>(N), flops / forward / 1e12, 2 * flops / backward / 1e12);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "matmul_bench: %s\n", e.what());
  return 1;
}

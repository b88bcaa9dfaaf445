// The memory rate of the row-wise and element-wise ops a training step of the Qwen3-0.6B shape runs (hidden
// 1024, 16 heads and 8 kv heads of 128, intermediate 3072, vocabulary 151,936): the median time of REPEAT
// calls after a warm-up, and GB/s against the bytes each call must read and write (each tensor once; the
// weights and rope tables, which stay in cache, too).
//
//   cuda_rowwise_bench [DEVICE] [DTYPE] [REPEAT] [TOKENS]   defaults: cuda:0 bfloat16 20 8192
#include <algorithm>
#include <cstdio>
#include <functional>
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
  const int64_t T = argc > 4 ? std::stoll(argv[4]) : 8192;
  tfm::check(repeat > 0 && T > 0, "usage: cuda_rowwise_bench [DEVICE] [DTYPE] [REPEAT] [TOKENS], both numbers positive");
  constexpr int64_t H = 1024, heads = 16, kv_heads = 8, D = 128, I = 3072, V = 151936;
  auto tensor = [&](const tfm::Shape& shape, tfm::DType type) {
    tfm::Tensor t = tfm::empty(shape, type, device);
    tfm::zero(t);
    return t;
  };
  auto floats = [&](const tfm::Shape& shape) { return tensor(shape, dtype); };
  const double e = static_cast<double>(tfm::dtype_size(dtype));
  // Elements of the tensors an op reads and writes, by size: the bytes it must move.
  auto bytes = [&](std::initializer_list<int64_t> counts) {
    double total = 0;
    for (int64_t c : counts) total += static_cast<double>(c) * e;
    return total;
  };

  tfm::Tensor x = floats({T, H}), y = floats({T, H}), out = floats({T, H}), norm = floats({H});
  tfm::Tensor q = floats({T, heads, D}), dq = floats({T, heads, D}), k = floats({T, kv_heads, D}),
              dk = floats({T, kv_heads, D}), head_norm = floats({D});
  tfm::Tensor cos = floats({T, D}), sin = floats({T, D});
  tfm::Tensor gate_up = floats({T, 2 * I}), dgate_up = floats({T, 2 * I}), act = floats({T, I});
  tfm::Tensor dnorm = tensor({H}, tfm::DType::float32), dhead_norm = tensor({D}, tfm::DType::float32);
  tfm::Tensor vk = floats({T, kv_heads, D}), dqkv = floats({T, (heads + 2 * kv_heads) * D}),
              dhead_norm2 = tensor({D}, tfm::DType::float32);
  tfm::Tensor qkv = floats({T, (heads + 2 * kv_heads) * D}), qs = floats({T, heads * D}),
              ks = floats({T, kv_heads * D}), vs = floats({T, kv_heads * D});
  tfm::Tensor logits = floats({T, V}), labels = tensor({T}, tfm::DType::int32), loss = tensor({1}, tfm::DType::float32);
  tfm::Tensor* const parts[] = {&qs, &ks, &vs};
  const tfm::Tensor* const ins[] = {&qs, &ks, &vs};
  const float eps = 1e-6f;
  const int64_t TH = T * H, TQ = T * heads * D, TK = T * kv_heads * D, TI = T * I;

  struct Bench {
    std::string name;
    double bytes;
    std::function<void()> run;
  };
  const std::vector<Bench> benches = {
      {"rms_norm (T, 1024)", bytes({TH, TH}), [&] { tfm::ops::rms_norm(x, norm, eps, out); }},
      {"rms_norm q (T, 16, 128)", bytes({TQ, TQ}), [&] { tfm::ops::rms_norm(q, head_norm, eps, dq); }},
      {"add_rms_norm (T, 1024)", bytes({TH, TH, TH, TH}),
       [&] { tfm::ops::add_rms_norm(x, y, norm, eps, out, "fused"); }},
      {"rms_norm_backward (T, 1024)", bytes({TH, TH, TH}),
       [&] { tfm::ops::rms_norm_backward(x, norm, eps, y, out, dnorm); }},
      {"rms_norm_backward added (T, 1024)", bytes({TH, TH, TH, TH}),
       [&] { tfm::ops::rms_norm_backward(x, norm, eps, y, out, dnorm, /*accumulate=*/true); }},
      {"rms_norm_backward q (T, 16, 128)", bytes({TQ, TQ, TQ}),
       [&] { tfm::ops::rms_norm_backward(q, head_norm, eps, dq, dq, dhead_norm); }},
      {"rms_norm_backward k (T, 8, 128)", bytes({TK, TK, TK}),
       [&] { tfm::ops::rms_norm_backward(k, head_norm, eps, dk, dk, dhead_norm); }},
      {"rope_ q (T, 16, 128)", bytes({TQ, TQ, T * D, T * D}), [&] { tfm::ops::rope_(q, cos, sin); }},
      {"silu_mul (T, 6144) -> (T, 3072)", bytes({2 * TI, TI}), [&] { tfm::ops::silu_mul(gate_up, act); }},
      {"silu_mul_backward (T, 6144)", bytes({2 * TI, TI, 2 * TI}),
       [&] { tfm::ops::silu_mul_backward(gate_up, act, dgate_up); }},
      {"add_ (T, 1024)", bytes({TH, TH, TH}), [&] { tfm::ops::add_(x, y); }},
      {"qkv_rope (T, 4096)", bytes({TQ + 2 * TK, TQ + 2 * TK, T * D, T * D}),
       [&] { tfm::ops::qkv_rope(qkv, head_norm, head_norm, eps, cos, sin, q, k, vk); }},
      {"qkv_rope_backward (T, 4096)", bytes({TQ + 2 * TK, TQ + TK, TQ + 2 * TK, T * D, T * D}),
       [&] {
         tfm::ops::qkv_rope_backward(qkv, head_norm, head_norm, eps, cos, sin, dq, dk, vk, dqkv, dhead_norm,
                                     dhead_norm2);
       }},
      {"split_columns (T, 4096)", bytes({TQ + 2 * TK, TQ + 2 * TK}),
       [&] { tfm::ops::split_columns(qkv, parts); }},
      {"concat_columns (T, 4096)", bytes({TQ + 2 * TK, TQ + 2 * TK}),
       [&] { tfm::ops::concat_columns(ins, qkv); }},
      {"cross_entropy (T, 151936) in place", bytes({T * V, T * V}),
       [&] { tfm::ops::cross_entropy(logits, labels, 1.f / static_cast<float>(T), loss, logits); }},
  };
  std::printf("%-36s %10s %10s %10s   (T = %lld, %s)\n", "op", "ms", "MB", "GB/s", static_cast<long long>(T),
              std::string(tfm::dtype_name(dtype)).c_str());
  for (const Bench& b : benches) {
    const double seconds = median_seconds(device, repeat, b.run);
    std::printf("%-36s %10.4f %10.1f %10.1f\n", b.name.c_str(), seconds * 1e3, b.bytes / 1e6, b.bytes / seconds / 1e9);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "cuda_rowwise_bench: %s\n", e.what());
  return 1;
}

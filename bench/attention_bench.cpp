// The attention of a training step (and of a prefill): paged_attention's default form over whole sequences,
// the same keeping each row's log-sum-exp (paged_attention_lse, where the device has it) and
// attention_backward with and without that log-sum-exp, and with it and the longest sequence known (as
// training calls it: a kernel may then keep the scores' gradients), for SEQS sequences of LEN tokens: the
// median time of REPEAT calls after a warm-up, and TFLOP/s of the causal work as flash attention counts it
// (forward 4 x LEN^2 / 2 x HEAD_DIM a head and sequence, the backward 2.5 times that), so that kernel changes
// are measured without a whole training run.
//
//   attention_bench [DEVICE] [DTYPE] [REPEAT] [SEQS] [LEN] [HEADS] [KV_HEADS] [HEAD_DIM]
//   defaults: cuda:0 bfloat16 20 8 1024 16 8 128 (the Qwen3-0.6B shape's training step)
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "device_timing.h"
#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/ops/ops.h"

using tfm::bench::median_seconds;

namespace {

constexpr int64_t kBlockSize = 16;

tfm::Tensor int_tensor(const std::vector<int32_t>& values, const tfm::Shape& shape, tfm::Device device) {
  tfm::Tensor host = tfm::Tensor::cpu(shape, tfm::DType::int32);
  std::copy(values.begin(), values.end(), host.data<int32_t>());
  return tfm::to_device(host, device);
}

}  // namespace

int main(int argc, char** argv) try {
  const tfm::Device device = tfm::resolve_device(argc > 1 ? argv[1] : "cuda:0");
  const tfm::DType dtype = tfm::parse_dtype(argc > 2 ? argv[2] : "bfloat16");
  int64_t numbers[] = {20, 8, 1024, 16, 8, 128};  // repeat, seqs, len, heads, kv_heads, head_dim
  for (int i = 3; i < argc && i < 9; ++i) numbers[i - 3] = std::stoll(argv[i]);
  const auto [repeat, seqs, len, heads, kv_heads, D] = numbers;
  constexpr int64_t kMaxTokens = int64_t{1} << 24, kMaxWidth = 4096;
  tfm::check(repeat > 0 && seqs > 0 && len > 0 && len % kBlockSize == 0 && seqs <= kMaxTokens && len <= kMaxTokens &&
                 seqs * len <= kMaxTokens && heads > 0 && kv_heads > 0 && heads % kv_heads == 0 && D > 0 &&
                 heads * D <= kMaxWidth,
             "usage: attention_bench [DEVICE] [DTYPE] [REPEAT] [SEQS] [LEN] [HEADS] [KV_HEADS] [HEAD_DIM]: positive "
             "numbers, LEN a multiple of ", kBlockSize, ", HEADS a multiple of KV_HEADS, at most ", kMaxTokens,
             " tokens and ", kMaxWidth, " elements a token's heads");
  const int64_t T = seqs * len, blocks = T / kBlockSize;
  auto zeros = [&](const tfm::Shape& shape, tfm::DType type) {
    tfm::Tensor t = tfm::empty(shape, type, device);
    tfm::zero(t);
    return t;
  };
  // Each sequence's tokens in blocks of its own, one after another: row t in cache slot t.
  std::vector<int32_t> query_start, context_lens, tables, positions, slots;
  for (int64_t s = 0; s <= seqs; ++s) query_start.push_back(static_cast<int32_t>(s * len));
  for (int64_t s = 0; s < seqs; ++s) {
    context_lens.push_back(static_cast<int32_t>(len));
    for (int64_t b = 0; b < len / kBlockSize; ++b) tables.push_back(static_cast<int32_t>(s * len / kBlockSize + b));
  }
  for (int64_t t = 0; t < T; ++t) {
    positions.push_back(static_cast<int32_t>(t % len));
    slots.push_back(static_cast<int32_t>(t));
  }
  const tfm::ops::AttentionMetadata meta{int_tensor(query_start, {seqs + 1}, device),
                                         int_tensor(context_lens, {seqs}, device),
                                         int_tensor(tables, {seqs, len / kBlockSize}, device),
                                         int_tensor(positions, {T}, device),
                                         int_tensor(slots, {T}, device),
                                         len,
                                         false};
  const tfm::Tensor q = zeros({T, heads, D}, dtype), k = zeros({T, kv_heads, D}, dtype),
                    v = zeros({T, kv_heads, D}, dtype), dout = zeros({T, heads, D}, dtype);
  tfm::Tensor cache_k = zeros({blocks, kBlockSize, kv_heads, D}, dtype),
              cache_v = zeros({blocks, kBlockSize, kv_heads, D}, dtype);
  tfm::Tensor out = zeros({T, heads, D}, dtype), dq = zeros({T, heads, D}, dtype),
              dk = zeros({T, kv_heads, D}, dtype), dv = zeros({T, kv_heads, D}, dtype);
  tfm::ops::kv_cache_write(k, v, meta.slots, cache_k, cache_v);
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
  const double forward_flops = 4.0 * static_cast<double>(len) * static_cast<double>(len) / 2 *
                               static_cast<double>(D) * static_cast<double>(heads * seqs);
  const double forward = median_seconds(device, static_cast<int>(repeat), [&] {
    tfm::ops::paged_attention(q, cache_k, cache_v, meta, scale, 0, out);
  });
  const double backward = median_seconds(device, static_cast<int>(repeat), [&] {
    tfm::ops::attention_backward(q, k, v, out, dout, meta.query_start, scale, 0, dq, dk, dv);
  });
  tfm::Tensor lse = zeros({T, heads}, tfm::DType::float32);
  const bool keeps_lse = tfm::ops::paged_attention_lse(q, cache_k, cache_v, meta, scale, 0, out, lse, {});
  const double forward_lse = keeps_lse ? median_seconds(device, static_cast<int>(repeat), [&] {
    tfm::ops::paged_attention_lse(q, cache_k, cache_v, meta, scale, 0, out, lse, {});
  }) : 0;
  const double backward_lse = keeps_lse ? median_seconds(device, static_cast<int>(repeat), [&] {
    tfm::ops::attention_backward(q, k, v, out, dout, meta.query_start, scale, 0, dq, dk, dv, lse);
  }) : 0;
  const double backward_kept =
      keeps_lse ? median_seconds(device, static_cast<int>(repeat),
                                 [&] {
                                   tfm::ops::attention_backward(q, k, v, out, dout, meta.query_start, scale,
                                                                0, dq, dk, dv, lse, len);
                                 })
                : 0;
  std::printf("%lld sequences of %lld tokens, %lld heads (%lld kv) of %lld, %s\n", static_cast<long long>(seqs),
              static_cast<long long>(len), static_cast<long long>(heads), static_cast<long long>(kv_heads),
              static_cast<long long>(D), tfm::dtype_name(dtype).data());
  std::printf("%-20s %9.3f ms %8.2f TFLOP/s\n", "forward", forward * 1e3, forward_flops / forward / 1e12);
  std::printf("%-20s %9.3f ms %8.2f TFLOP/s\n", "backward", backward * 1e3, 2.5 * forward_flops / backward / 1e12);
  if (!keeps_lse) {
    std::printf("(no paged_attention_lse kernel on %s for these arguments)\n", device.str().c_str());
    return 0;
  }
  std::printf("%-20s %9.3f ms %8.2f TFLOP/s\n", "forward, lse kept", forward_lse * 1e3,
              forward_flops / forward_lse / 1e12);
  std::printf("%-20s %9.3f ms %8.2f TFLOP/s\n", "backward, lse given", backward_lse * 1e3,
              2.5 * forward_flops / backward_lse / 1e12);
  std::printf("%-20s %9.3f ms %8.2f TFLOP/s\n", "backward, max known", backward_kept * 1e3,
              2.5 * forward_flops / backward_kept / 1e12);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "attention_bench: %s\n", e.what());
  return 1;
}

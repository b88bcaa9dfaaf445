// Times the xpu op kernels on the OpenCL platform TFM_XPU_PLATFORM names (Intel GPUs when unset): a launch,
// linear at the decode shapes of Qwen3-0.6B and Qwen3-8B and one prefill shape, and paged attention for one
// decode step and one prefill (both forms).
//
//   TFM_XPU_PLATFORM="NVIDIA CUDA" xpu_ops_bench [--quick] [--dtype float32|bfloat16|float16]
//
// --quick uses smaller shapes, for CPU platforms such as PoCL; --dtype the tensors' dtype (float32 by
// default). Each case runs once to build its kernels, then repeats until about 0.3 s have passed.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/ops/ops.h"

namespace {

using namespace tfm;

const Device kXpu{DeviceType::xpu, 0};

// Random values in [-1, 1) as `dtype`, converted on the host.
Tensor random_on_xpu(const Shape& shape, DType dtype, std::mt19937& rng) {
  Tensor t = Tensor::cpu(shape, DType::float32);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  Tensor stored = Tensor::cpu(shape, dtype);
  ops::cast(t, stored);
  return to_device(stored, kXpu);
}

Tensor ints_on_xpu(const std::vector<int32_t>& values) {
  Tensor t = Tensor::cpu({static_cast<int64_t>(values.size())}, DType::int32);
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return to_device(t, kXpu);
}

// Seconds per call of `op`, after one untimed call: calls are issued kBatch at a time between waits, so a
// short kernel's time is the device's (or the host's issuing, when that is slower), not a round trip's.
double time_per_call(const std::function<void()>& op) {
  constexpr int kBatch = 20;
  Backend& backend = *find_backend(DeviceType::xpu);
  op();
  backend.synchronize(0);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  int calls = 0;
  double elapsed = 0;
  do {
    for (int i = 0; i < kBatch; ++i) op();
    backend.synchronize(0);
    calls += kBatch;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  } while (elapsed < 0.3);
  return elapsed / calls;
}

// The shortest kernel: a pointwise add over `n` elements, for the cost of one launch.
void bench_launch(int64_t n, DType dtype, std::mt19937& rng) {
  Tensor x = random_on_xpu({n}, dtype, rng);
  const Tensor y = random_on_xpu({n}, dtype, rng);
  const double s = time_per_call([&] { ops::add_(x, y); });
  // The host's share: issuing without waiting, until the queue is long enough to tell.
  constexpr int kIssued = 2000;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kIssued; ++i) ops::add_(x, y);
  const double issue = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kIssued;
  find_backend(DeviceType::xpu)->synchronize(0);
  std::printf("launch    add of %lld elements %9.3f ms a launch, of which %.3f ms issuing on the host\n",
              static_cast<long long>(n), s * 1e3, issue * 1e3);
}

void bench_linear(int64_t M, int64_t K, int64_t N, DType dtype, std::mt19937& rng) {
  const Tensor x = random_on_xpu({M, K}, dtype, rng), w = random_on_xpu({N, K}, dtype, rng);
  Tensor y = empty({M, N}, dtype, kXpu);
  std::printf("linear    M=%-5lld K=%-5lld N=%-6lld", static_cast<long long>(M), static_cast<long long>(K),
              static_cast<long long>(N));
  std::fflush(stdout);  // a case that never returns is named
  const double s = time_per_call([&] { ops::linear(x, w, Tensor(), y); });
  const double weight_gb = static_cast<double>(N * K * dtype_size(dtype)) / 1e9;
  std::printf(" %9.3f ms  %8.1f GFLOP/s  %7.1f GB/s of weights\n", s * 1e3, 2.0 * M * K * N / s / 1e9,
              weight_gb / s);
}

// One attention call over `batch` sequences of `context` tokens each: decode (`rows` 1, the last position)
// or prefill (`rows` = `context`, every position).
void bench_attention(int64_t batch, int64_t context, int64_t rows, int64_t heads, int64_t kv_heads,
                     int64_t head_dim, DType dtype, std::mt19937& rng) {
  const int64_t block_size = 16, blocks_per_seq = (context + block_size - 1) / block_size;
  const int64_t blocks = batch * blocks_per_seq;
  const Tensor cache_k = random_on_xpu({blocks, block_size, kv_heads, head_dim}, dtype, rng);
  const Tensor cache_v = random_on_xpu({blocks, block_size, kv_heads, head_dim}, dtype, rng);
  std::vector<int32_t> query_start{0}, tables(static_cast<size_t>(blocks)), positions;
  for (int64_t s = 0; s < batch; ++s) {
    query_start.push_back(static_cast<int32_t>((s + 1) * rows));
    for (int64_t r = context - rows; r < context; ++r) positions.push_back(static_cast<int32_t>(r));
  }
  std::iota(tables.begin(), tables.end(), 0);
  std::shuffle(tables.begin(), tables.end(), rng);
  ops::AttentionMetadata meta;
  meta.query_start = ints_on_xpu(query_start);
  meta.context_lens =
      ints_on_xpu(std::vector<int32_t>(static_cast<size_t>(batch), static_cast<int32_t>(context)));
  meta.block_tables = ints_on_xpu(tables).reshape({batch, blocks_per_seq});
  meta.positions = ints_on_xpu(positions);
  meta.slots = meta.positions;
  meta.max_context_len = context;
  const Tensor q = random_on_xpu({batch * rows, heads, head_dim}, dtype, rng);
  Tensor out = empty({batch * rows, heads, head_dim}, dtype, kXpu);
  const double kv_gb =
      2.0 * static_cast<double>(batch * context * kv_heads * head_dim * dtype_size(dtype)) / 1e9;
  // Decode reads the cache; prefill multiplies q k and p v for every (row, key) pair a causal row sees.
  const double pairs = static_cast<double>(batch * heads) * static_cast<double>(rows) *
                       static_cast<double>(2 * context - rows + 1) / 2;
  for (const char* variant : {"flash", "eager"}) {
    const double s = time_per_call([&] {
      ops::paged_attention(q, cache_k, cache_v, meta, 1.f / std::sqrt(static_cast<float>(head_dim)), 0, out,
                           variant);
    });
    std::printf("attention %-7s batch=%-3lld context=%-6lld heads=%lld/%lld dim=%lld %-8s %9.3f ms",
                rows == 1 ? "decode" : "prefill", static_cast<long long>(batch),
                static_cast<long long>(context), static_cast<long long>(heads),
                static_cast<long long>(kv_heads), static_cast<long long>(head_dim), variant, s * 1e3);
    if (rows == 1) {
      std::printf("  %7.1f GB/s of KV\n", kv_gb / s);
    } else {
      std::printf("  %7.1f GFLOP/s\n", 4.0 * pairs * static_cast<double>(head_dim) / s / 1e9);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  DType dtype = DType::float32;
  try {
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--quick") == 0) {
        quick = true;
      } else if (std::strcmp(argv[i], "--dtype") == 0 && i + 1 < argc) {
        dtype = parse_dtype(argv[++i]);
      } else {
        std::fprintf(stderr, "usage: xpu_ops_bench [--quick] [--dtype float32|bfloat16|float16]\n");
        return 2;
      }
    }
    Backend* backend = find_backend(DeviceType::xpu);
    if (!backend || backend->device_count() == 0) {
      std::fprintf(stderr,
                   "xpu_ops_bench: no xpu device (set TFM_XPU_PLATFORM to an OpenCL platform name)\n");
      return 1;
    }
    const DeviceInfo info = backend->info(0);
    std::printf("xpu:0 %s (%s), %s\n", info.name.c_str(), info.driver_version.c_str(),
                std::string(dtype_name(dtype)).c_str());
    std::mt19937 rng(1);
    bench_launch(1024, dtype, rng);
    // The matrices of a decode step of the Qwen3-0.6B and Qwen3-8B shapes: fused q/k/v, o, fused gate/up, down,
    // and the vocabulary head (0.6B ties it to the embedding); then one prefill-sized matmul.
    struct Matrix {
      int64_t K, N;
    };
    const std::vector<Matrix> matrices =
        quick ? std::vector<Matrix>{{1024, 4096}, {3072, 1024}}
              : std::vector<Matrix>{{1024, 4096},  {2048, 1024},  {1024, 6144},   {3072, 1024},
                                    {1024, 151936}, {4096, 6144}, {4096, 4096},   {4096, 24576},
                                    {12288, 4096}, {4096, 151936}};
    for (int64_t M : {int64_t{1}, int64_t{8}})
      for (const Matrix& m : matrices) bench_linear(M, m.K, m.N, dtype, rng);
    bench_linear(quick ? 64 : 512, matrices[0].K, matrices[0].N, dtype, rng);
    for (int64_t batch : {1, 8}) {
      for (int64_t context : {256, 512, quick ? 2048 : 8192}) {
        bench_attention(batch, context, 1, 16, 8, 128, dtype, rng);
        bench_attention(batch, context, 1, 32, 8, 128, dtype, rng);
      }
    }
    for (int64_t context : {512, quick ? 1024 : 2048})
      bench_attention(1, context, context, 16, 8, 128, dtype, rng);
  } catch (const tfm::Error& e) {
    std::fprintf(stderr, "xpu_ops_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

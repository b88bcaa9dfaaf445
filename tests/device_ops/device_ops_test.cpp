// Every device's op kernels against the CPU backend's, op by op (xpu on the OpenCL test platform, cuda when a
// GPU is present; a device that is absent skips): fresh random inputs of several shapes (sizes that are not
// multiples of any work-group or tile, decode and prefill rows, ragged sequences), the xpu outputs poisoned
// with NaN before the run, results within float32 accumulation error of the CPU's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "../xpu/test_platform.h"
#ifdef TFM_HAVE_XPU
#include "tfm/backend/xpu/xpu_backend.h"
#include "tfm/backend/xpu/xpu_op_kernels.h"
#endif
#include "tfm/core/error.h"
#include "tfm/ops/ops.h"

namespace tfm {
namespace {

// The device of the running test, set by the fixture.
Device g_device;

constexpr double kTolerance = 1e-5;  // of the largest magnitude in the CPU's result

Device xpu() {
  return g_device;
}

class DeviceOps : public testing::TestWithParam<DeviceType> {
 protected:
  void SetUp() override {
    if (GetParam() == DeviceType::xpu) {
      if (!xpu::seam_test_device())
        GTEST_SKIP() << "no OpenCL device on platform '" << xpu::test_platform() << "'";
    } else {
      Backend* b = find_backend(GetParam());
      if (!b || b->device_count() == 0) GTEST_SKIP() << "no " << device_type_name(GetParam()) << " device";
    }
    g_device = Device{GetParam(), 0};
  }
};

Tensor random_floats(const Shape& shape, std::mt19937& rng) {
  Tensor t = Tensor::cpu(shape, DType::float32);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

Tensor int_tensor(const std::vector<int32_t>& values, const Shape& shape) {
  Tensor t = Tensor::cpu(shape, DType::int32);
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t;
}

// A host copy to update in place on the cpu.
Tensor copy_of(const Tensor& t) {
  Tensor out = Tensor::cpu(t.shape(), t.dtype());
  std::memcpy(out.raw(), t.raw(), t.nbytes());
  return out;
}

std::vector<int32_t> random_ints(int64_t n, int32_t bound, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(0, bound - 1);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (auto& v : out) v = dist(rng);
  return out;
}

// An xpu buffer of `shape` full of NaN, so that an element the kernel fails to write shows.
Tensor poisoned(const Shape& shape) {
  Tensor t = Tensor::cpu(shape, DType::float32);
  std::fill_n(t.data<float>(), t.numel(), std::numeric_limits<float>::quiet_NaN());
  return to_device(t, xpu());
}

// max |got - want| over max |want|, with NaN in `got` failing the test.
void expect_close(const Tensor& got_xpu, const Tensor& want, const std::string& what) {
  const Tensor got = to_device(got_xpu, Device{});
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.data<float>()[i], w = want.data<float>()[i];
    ASSERT_FALSE(std::isnan(g)) << what << ": element " << i << " not written";
    diff = std::max(diff, std::fabs(g - w));
    scale = std::max(scale, std::fabs(w));
  }
  EXPECT_LE(diff, kTolerance * std::max(scale, 1e-30))
      << what << ": max error " << diff << " at scale " << scale;
}

std::string shape_of(std::initializer_list<int64_t> sizes) {
  return shape_str(Shape(sizes));
}

TEST_P(DeviceOps, Embedding) {
  std::mt19937 rng(1);
  for (int64_t H : {1, 5, 64, 130}) {
    for (int64_t T : {1, 9}) {
      const Tensor table = random_floats({37, H}, rng);
      const Tensor ids = int_tensor(random_ints(T, 37, rng), {T});
      Tensor want = Tensor::cpu({T, H}, DType::float32);
      ops::embedding(table, ids, want);
      Tensor got = poisoned({T, H});
      ops::embedding(to_device(table, xpu()), to_device(ids, xpu()), got);
      expect_close(got, want, "embedding " + shape_of({T, H}));
    }
  }
}

TEST_P(DeviceOps, LinearWithAndWithoutBias) {
  std::mt19937 rng(2);
  // Few-row (M <= 8) and tiled shapes, none a multiple of the 64x64x16 tiles but some.
  const int64_t shapes[][3] = {{1, 1, 1},    {1, 67, 33},   {3, 128, 100}, {8, 257, 65},
                               {9, 70, 129}, {37, 200, 97}, {64, 64, 64},  {130, 33, 250}};
  for (const auto& [M, K, N] : shapes) {
    for (bool with_bias : {false, true}) {
      const Tensor x = random_floats({M, K}, rng), w = random_floats({N, K}, rng);
      const Tensor bias = with_bias ? random_floats({N}, rng) : Tensor();
      Tensor want = Tensor::cpu({M, N}, DType::float32);
      ops::linear(x, w, bias, want);
      Tensor got = poisoned({M, N});
      ops::linear(to_device(x, xpu()), to_device(w, xpu()), with_bias ? to_device(bias, xpu()) : Tensor(),
                  got);
      expect_close(got, want, "linear " + shape_of({M, K, N}) + (with_bias ? " with bias" : ""));
    }
  }
}

TEST_P(DeviceOps, LinearOnViewsInsideLargerBuffers) {
  std::mt19937 rng(3);
  for (int64_t M : {2, 20}) {  // both kernels
    const int64_t K = 19, N = 23;
    const Tensor x_all = random_floats({M + 3, K}, rng), w_all = random_floats({N + 1, K}, rng);
    const Tensor x = x_all.narrow(3, M), w = w_all.narrow(1, N);
    Tensor want = Tensor::cpu({M, N}, DType::float32);
    ops::linear(to_device(x, Device{}), to_device(w, Device{}), Tensor(), want);
    Tensor y_all = poisoned({M + 2, N});
    Tensor y = y_all.narrow(2, M);
    ops::linear(to_device(x_all, xpu()).narrow(3, M), to_device(w_all, xpu()).narrow(1, N), Tensor(), y);
    expect_close(y, want, "linear on views, M " + std::to_string(M));
    const Tensor before = to_device(y_all.narrow(0, 2), Device{});  // rows before the view stay untouched
    for (int64_t i = 0; i < before.numel(); ++i) ASSERT_TRUE(std::isnan(before.data<float>()[i])) << i;
  }
}

TEST_P(DeviceOps, RmsNormOutOfPlaceAndInPlace) {
  std::mt19937 rng(4);
  for (int64_t D : {1, 7, 64, 300}) {
    for (int64_t rows : {1, 6}) {
      const Tensor x = random_floats({rows, D}, rng), weight = random_floats({D}, rng);
      Tensor want = Tensor::cpu({rows, D}, DType::float32);
      ops::rms_norm(x, weight, 1e-6f, want);
      Tensor got = poisoned({rows, D});
      const Tensor x_xpu = to_device(x, xpu()), weight_xpu = to_device(weight, xpu());
      ops::rms_norm(x_xpu, weight_xpu, 1e-6f, got);
      expect_close(got, want, "rms_norm " + shape_of({rows, D}));
      Tensor in_place = to_device(x, xpu());
      ops::rms_norm(in_place, weight_xpu, 1e-6f, in_place);
      expect_close(in_place, want, "rms_norm in place " + shape_of({rows, D}));
    }
  }
  // (T, heads, head_dim) normalized per head, as q_norm and k_norm are.
  const Tensor q = random_floats({3, 5, 16}, rng), weight = random_floats({16}, rng);
  Tensor want = Tensor::cpu({3, 5, 16}, DType::float32);
  ops::rms_norm(q, weight, 1e-5f, want);
  Tensor got = to_device(q, xpu());
  ops::rms_norm(got, to_device(weight, xpu()), 1e-5f, got);
  expect_close(got, want, "rms_norm per head");
}

TEST_P(DeviceOps, RopeFullAndPartialRotation) {
  std::mt19937 rng(5);
  const int64_t shapes[][4] = {
      {1, 1, 8, 8}, {5, 3, 16, 16}, {4, 2, 10, 4}, {7, 4, 64, 32}};  // T heads dim rot
  for (const auto& [T, heads, D, rot] : shapes) {
    const Tensor x = random_floats({T, heads, D}, rng), cos = random_floats({T, rot}, rng),
                 sin = random_floats({T, rot}, rng);
    Tensor want = copy_of(x);
    ops::rope_(want, cos, sin);
    Tensor got = to_device(x, xpu());
    ops::rope_(got, to_device(cos, xpu()), to_device(sin, xpu()));
    expect_close(got, want, "rope " + shape_of({T, heads, D, rot}));
  }
}

TEST_P(DeviceOps, SiluMul) {
  std::mt19937 rng(6);
  for (int64_t T : {1, 6}) {
    for (int64_t I : {1, 70, 300}) {
      Tensor gate_up = random_floats({T, 2 * I}, rng);
      for (int64_t i = 0; i < gate_up.numel(); ++i) gate_up.data<float>()[i] *= 8.f;  // both tails of silu
      Tensor want = Tensor::cpu({T, I}, DType::float32);
      ops::silu_mul(gate_up, want);
      Tensor got = poisoned({T, I});
      ops::silu_mul(to_device(gate_up, xpu()), got);
      expect_close(got, want, "silu_mul " + shape_of({T, I}));
    }
  }
}

TEST_P(DeviceOps, AddInPlaceIncludingAView) {
  std::mt19937 rng(7);
  for (int64_t n : {1, 1000, 4097}) {
    const Tensor x = random_floats({n}, rng), y = random_floats({n}, rng);
    Tensor want = copy_of(x);
    ops::add_(want, y);
    Tensor got = to_device(x, xpu());
    ops::add_(got, to_device(y, xpu()));
    expect_close(got, want, "add " + std::to_string(n));
  }
  const Tensor x = random_floats({4, 33}, rng), y = random_floats({4, 33}, rng);
  Tensor want = copy_of(x)[2];
  ops::add_(want, y[1]);
  Tensor x_xpu = to_device(x, xpu());
  Tensor got = x_xpu[2];
  ops::add_(got, to_device(y, xpu())[1]);
  expect_close(got, want, "add on rows of larger buffers");
}

TEST_P(DeviceOps, SplitColumns) {
  std::mt19937 rng(8);
  for (int64_t T : {1, 4}) {
    const std::vector<int64_t> widths{3, 64, 5};
    const Tensor x = random_floats({T, 72}, rng);
    std::vector<Tensor> want, got;
    for (int64_t w : widths) {
      want.push_back(Tensor::cpu({T, w}, DType::float32));
      got.push_back(poisoned({T, w}));
    }
    std::vector<Tensor*> want_ptrs, got_ptrs;
    for (size_t i = 0; i < widths.size(); ++i) {
      want_ptrs.push_back(&want[i]);
      got_ptrs.push_back(&got[i]);
    }
    ops::split_columns(x, want_ptrs);
    ops::split_columns(to_device(x, xpu()), got_ptrs);
    for (size_t i = 0; i < widths.size(); ++i)
      expect_close(got[i], want[i], "split_columns part " + std::to_string(i));
  }
}

TEST_P(DeviceOps, GatherRows) {
  std::mt19937 rng(9);
  for (int64_t H : {1, 65}) {
    for (int64_t R : {1, 5}) {
      const Tensor x = random_floats({11, H}, rng);
      const Tensor rows = int_tensor(random_ints(R, 11, rng), {R});
      Tensor want = Tensor::cpu({R, H}, DType::float32);
      ops::gather_rows(x, rows, want);
      Tensor got = poisoned({R, H});
      ops::gather_rows(to_device(x, xpu()), to_device(rows, xpu()), got);
      expect_close(got, want, "gather_rows " + shape_of({R, H}));
    }
  }
}

TEST_P(DeviceOps, KvCacheWrite) {
  std::mt19937 rng(10);
  for (int64_t T : {1, 7}) {
    const int64_t blocks = 5, block_size = 4, kv_heads = 3, D = 6;
    const Tensor k = random_floats({T, kv_heads, D}, rng), v = random_floats({T, kv_heads, D}, rng);
    std::vector<int32_t> slots(blocks * block_size);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(static_cast<size_t>(T));
    const Tensor slot_tensor = int_tensor(slots, {T});
    const Tensor cache_k = random_floats({blocks, block_size, kv_heads, D}, rng);
    const Tensor cache_v = random_floats({blocks, block_size, kv_heads, D}, rng);
    ops::LayerCache want{copy_of(cache_k), copy_of(cache_v)};
    ops::kv_cache_write(k, v, slot_tensor, want);
    ops::LayerCache got{to_device(cache_k, xpu()), to_device(cache_v, xpu())};
    ops::kv_cache_write(to_device(k, xpu()), to_device(v, xpu()), to_device(slot_tensor, xpu()), got);
    expect_close(got.key, want.key, "kv_cache_write keys, T " + std::to_string(T));
    expect_close(got.value, want.value, "kv_cache_write values, T " + std::to_string(T));
  }
}

// Sequences of one attention call: `cached` tokens already in the cache, `fresh` query rows this step.
struct SequenceShape {
  int32_t cached, fresh;
};

struct AttentionCase {
  int64_t heads, kv_heads, head_dim, block_size, window;
  std::vector<SequenceShape> seqs;
};

// Metadata for `seqs` over a cache of `blocks` blocks handed out in random order, on `device`.
AttentionMetadata metadata(const std::vector<SequenceShape>& seqs, int64_t block_size, int64_t blocks,
                           std::mt19937& rng, Device device) {
  const int64_t S = static_cast<int64_t>(seqs.size());
  int64_t max_blocks = 1;
  for (const auto& s : seqs)
    max_blocks = std::max(max_blocks, (s.cached + s.fresh + block_size - 1) / block_size);
  std::vector<int32_t> pool(static_cast<size_t>(blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<int32_t> query_start{0}, context_lens, tables(static_cast<size_t>(S * max_blocks), 0),
      positions;
  size_t next_block = 0;
  for (int64_t s = 0; s < S; ++s) {
    const auto& seq = seqs[static_cast<size_t>(s)];
    query_start.push_back(query_start.back() + seq.fresh);
    context_lens.push_back(seq.cached + seq.fresh);
    for (int64_t b = 0; b < (seq.cached + seq.fresh + block_size - 1) / block_size; ++b) {
      tables[static_cast<size_t>(s * max_blocks + b)] = pool.at(next_block++);
    }
    for (int32_t i = 0; i < seq.fresh; ++i) positions.push_back(seq.cached + i);
  }
  const int64_t T = query_start.back();
  AttentionMetadata m;
  m.query_start = to_device(int_tensor(query_start, {S + 1}), device);
  m.context_lens = to_device(int_tensor(context_lens, {S}), device);
  m.block_tables = to_device(int_tensor(tables, {S, max_blocks}), device);
  m.positions = to_device(int_tensor(positions, {T}), device);
  m.slots =
      to_device(int_tensor(std::vector<int32_t>(static_cast<size_t>(T), 0), {T}), device);  // unused here
  m.max_context_len = *std::max_element(context_lens.begin(), context_lens.end());
  return m;
}

AttentionMetadata on_device(const AttentionMetadata& m, Device device) {
  AttentionMetadata out = m;
  for (Tensor* t : {&out.query_start, &out.context_lens, &out.block_tables, &out.positions, &out.slots}) {
    *t = to_device(*t, device);
  }
  return out;
}

// Runs `c` through the CPU kernels and through `run_xpu` on the same random cache and queries, both forms.
void check_attention(const AttentionCase& c, unsigned seed,
                     const std::function<void(const Tensor&, const ops::LayerCache&, const AttentionMetadata&,
                                              float, int64_t, bool, Tensor&)>& run_xpu) {
  std::mt19937 rng(seed);
  int64_t blocks = 0, T = 0;
  for (const auto& s : c.seqs) {
    blocks += (s.cached + s.fresh + c.block_size - 1) / c.block_size;
    T += s.fresh;
  }
  blocks += 2;  // blocks no sequence uses
  const AttentionMetadata meta_cpu = metadata(c.seqs, c.block_size, blocks, rng, Device{});
  const AttentionMetadata meta_xpu = on_device(meta_cpu, xpu());
  const Tensor q = random_floats({T, c.heads, c.head_dim}, rng);
  const ops::LayerCache cache{random_floats({blocks, c.block_size, c.kv_heads, c.head_dim}, rng),
                              random_floats({blocks, c.block_size, c.kv_heads, c.head_dim}, rng)};
  const ops::LayerCache cache_xpu{to_device(cache.key, xpu()), to_device(cache.value, xpu())};
  const float scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
  std::string what = "attention heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) +
                     " dim " + std::to_string(c.head_dim) + " block " + std::to_string(c.block_size) +
                     " window " + std::to_string(c.window) + " seqs";
  for (const auto& s : c.seqs) what += " " + std::to_string(s.cached) + "+" + std::to_string(s.fresh);
  for (bool eager : {true, false}) {
    const auto impl = eager ? ops::AttentionImpl::eager : ops::AttentionImpl::sdpa;
    Tensor want = Tensor::cpu({T, c.heads, c.head_dim}, DType::float32);
    ops::paged_attention(q, cache, meta_cpu, scale, c.window, impl, want);
    Tensor got = poisoned({T, c.heads, c.head_dim});
    run_xpu(to_device(q, xpu()), cache_xpu, meta_xpu, scale, c.window, eager, got);
    expect_close(got, want, what + (eager ? " eager" : " one-pass"));
  }
}

const std::vector<AttentionCase>& attention_cases() {
  static const std::vector<AttentionCase> cases = {
      // Decode steps (one row per sequence), contexts across several 64-key tiles, GQA ratios 1 and 4.
      {4, 4, 16, 4, 0, {{0, 1}, {69, 1}, {149, 1}}},
      {8, 2, 16, 16, 0, {{10, 1}, {0, 1}, {200, 1}}},
      {8, 2, 80, 4, 5, {{69, 1}, {3, 1}}},  // head_dim past one item per dimension, sliding window
      {4, 1, 32, 16, 70, {{100, 1}}},
      // Prefill and mixed steps: several rows per sequence, a row per sequence, windows on and off.
      {4, 4, 16, 4, 0, {{0, 5}, {9, 1}, {130, 17}}},
      {8, 2, 32, 4, 6, {{0, 20}, {7, 3}}},
      {4, 1, 80, 16, 0, {{0, 70}, {65, 2}}},
      {6, 3, 16, 2, 3, {{0, 1}, {0, 9}, {4, 4}}},
  };
  return cases;
}

TEST_P(DeviceOps, PagedAttentionMatchesCpuInBothForms) {
  unsigned seed = 100;
  for (const AttentionCase& c : attention_cases()) {
    check_attention(c, seed++,
                    [](const Tensor& q, const ops::LayerCache& cache, const AttentionMetadata& meta,
                       float scale, int64_t window, bool eager, Tensor& out) {
                      ops::paged_attention(q, cache, meta, scale, window,
                                           eager ? ops::AttentionImpl::eager : ops::AttentionImpl::sdpa, out);
                    });
  }
}

#ifdef TFM_HAVE_XPU
TEST_P(DeviceOps, EagerAttentionInSeveralLaunchesWhenScoresExceedTheScratch) {
  if (GetParam() != DeviceType::xpu) GTEST_SKIP() << "the scratch limit is the xpu kernels'";
  // Scratch for three query rows of 8 heads by 90 keys: the 20 rows of the prefill go in 7 launches.
  const std::unique_ptr<OpKernels> kernels =
      xpu::make_xpu_op_kernels(xpu::xpu_backend(), 3 * 8 * 90 * sizeof(float));
  check_attention({8, 2, 16, 4, 0, {{70, 20}, {0, 1}}}, 7,
                  [&](const Tensor& q, const ops::LayerCache& cache, const AttentionMetadata& meta,
                      float scale, int64_t window, bool eager, Tensor& out) {
                    kernels->paged_attention(q, cache.key, cache.value, meta, scale, window, eager, out);
                  });
}

TEST_P(DeviceOps, EagerAttentionNeedsTheMaximumContextLength) {
  if (GetParam() != DeviceType::xpu) GTEST_SKIP() << "only the xpu kernels size scratch from it";
  std::mt19937 rng(11);
  AttentionMetadata meta = metadata({{3, 1}}, 4, 2, rng, xpu());
  meta.max_context_len = 0;
  const ops::LayerCache cache{poisoned({2, 4, 1, 8}), poisoned({2, 4, 1, 8})};
  Tensor out = poisoned({1, 1, 8});
  EXPECT_THROW(ops::paged_attention(poisoned({1, 1, 8}), cache, meta, 1.f, 0, ops::AttentionImpl::eager, out),
               Error);
}

#endif

INSTANTIATE_TEST_SUITE_P(Devices, DeviceOps, testing::Values(DeviceType::xpu, DeviceType::cuda),
                         [](const testing::TestParamInfo<DeviceType>& info) {
                           return std::string(device_type_name(info.param));
                         });

}  // namespace
}  // namespace tfm

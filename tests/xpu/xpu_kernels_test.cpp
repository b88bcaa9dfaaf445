// What the kernel conformance test (tests/kernels) cannot see of the xpu kernels: the eager attention's
// scratch limit, which splits a long prefill over several launches, and its need for max_context_len. On the
// OpenCL test platform; skips when it has no device.
#include "tfm/backend/xpu/xpu_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "support/random_tensor.h"
#include "test_platform.h"
#include "tfm/backend/xpu/xpu_backend.h"
#include "tfm/core/error.h"
#include "tfm/core/floats.h"
#include "tfm/ops/ops.h"

namespace tfm::xpu {
namespace {

class XpuKernelsTest : public OnTestDevice<testing::TestWithParam<DType>> {};

// The conformance test's: of the result's largest magnitude.
double tolerance(DType d) {
  return d == DType::float32 ? 1e-5 : d == DType::bfloat16 ? 1.5e-2 : 2e-3;
}

// Random values in [-1, 1) as `dtype` on `device`, converted by the CPU's cast.
Tensor random_values(const Shape& shape, DType dtype, Device device, std::mt19937& rng) {
  return to_device(test_support::random_tensor(shape, dtype, rng), device);
}

Tensor ints(std::vector<int32_t> values, const Shape& shape, Device device) {
  Tensor t = Tensor::cpu(shape, DType::int32);
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return to_device(t, device);
}

// One attention step: a prefill of 20 rows after 70 cached tokens, and a sequence's first row; 8 query heads
// over 2 KV heads of 16, blocks of 4 handed out in order.
struct AttentionStep {
  static constexpr int64_t kRows = 21, kHeads = 8, kKvHeads = 2, kDim = 16, kBlockSize = 4, kBlocks = 24;
  Tensor q, cache_k, cache_v;
  op::AttentionMetadata meta;

  AttentionStep(DType dtype, Device device) {
    std::mt19937 rng(7);
    q = random_values({kRows, kHeads, kDim}, dtype, device, rng);
    cache_k = random_values({kBlocks, kBlockSize, kKvHeads, kDim}, dtype, device, rng);
    cache_v = random_values({kBlocks, kBlockSize, kKvHeads, kDim}, dtype, device, rng);
    std::vector<int32_t> tables(2 * 23, 0), positions(kRows);
    std::iota(tables.begin(), tables.begin() + 23, 0);  // 90 tokens in blocks 0..22
    tables[23] = 23;
    std::iota(positions.begin(), positions.begin() + 20, 70);
    positions[20] = 0;
    meta.query_start = ints({0, 20, 21}, {3}, device);
    meta.context_lens = ints({90, 1}, {2}, device);
    meta.block_tables = ints(tables, {2, 23}, device);
    meta.positions = ints(positions, {kRows}, device);
    meta.slots = ints(std::vector<int32_t>(kRows, 0), {kRows}, device);
    meta.max_context_len = 90;
  }

  Tensor run(XpuKernels& kernels) const {
    Tensor out = empty(q.shape(), q.dtype(), q.device());
    kernels.run(op::PagedAttention{q, cache_k, cache_v, meta, 0.25f, 0, out}, AttentionForm::eager);
    return to_device(out, Device{});
  }
};

TEST_P(XpuKernelsTest, EagerAttentionInSeveralLaunchesWhenScoresExceedTheScratch) {
  const AttentionStep step(GetParam(), device_);
  // Scratch for three query rows of 8 heads by 90 keys: the 21 rows go in 7 launches. Each (row, head) is one
  // work-group either way, so the results must not change by a bit.
  XpuKernels small(xpu_backend(), 3 * 8 * 90 * sizeof(float));
  const Tensor split = step.run(small), whole = step.run(xpu_kernels());
  ASSERT_EQ(split.nbytes(), whole.nbytes());
  EXPECT_EQ(std::memcmp(split.raw(), whole.raw(), split.nbytes()), 0);

  // And they are the CPU's eager attention in the same dtype, up to float32 summation order (which may move
  // an intermediate rounding by one step of the dtype).
  Tensor want = Tensor::cpu(split.shape(), GetParam());
  op::AttentionMetadata meta_cpu = step.meta;
  for (Tensor* t : {&meta_cpu.query_start, &meta_cpu.context_lens, &meta_cpu.block_tables,
                    &meta_cpu.positions, &meta_cpu.slots}) {
    *t = to_device(*t, Device{});
  }
  ops::paged_attention(to_device(step.q, Device{}), to_device(step.cache_k, Device{}),
                       to_device(step.cache_v, Device{}), meta_cpu, 0.25f, 0, want, "eager");
  double diff = 0, scale = 0;
  visit_float(GetParam(), [&]<typename T>() {
    for (int64_t i = 0; i < want.numel(); ++i) {
      const double g = to_float(split.data<T>()[i]), w = to_float(want.data<T>()[i]);
      ASSERT_FALSE(std::isnan(g)) << "element " << i;
      diff = std::max(diff, std::fabs(g - w));
      scale = std::max(scale, std::fabs(w));
    }
  });
  EXPECT_LE(diff, tolerance(GetParam()) * scale) << "max error " << diff << " at scale " << scale;
}

TEST_P(XpuKernelsTest, EagerAttentionNeedsTheMaximumContextLength) {
  AttentionStep step(GetParam(), device_);
  step.meta.max_context_len = 0;
  Tensor out = empty(step.q.shape(), step.q.dtype(), device_);
  EXPECT_THROW(ops::paged_attention(step.q, step.cache_k, step.cache_v, step.meta, 0.25f, 0, out, "eager"),
               Error);
}

INSTANTIATE_TEST_SUITE_P(DTypes, XpuKernelsTest, testing::ValuesIn(kComputeDTypes),
                         [](const testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

}  // namespace
}  // namespace tfm::xpu

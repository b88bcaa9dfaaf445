// The AdamW optimizer over tensors that lie end to end in one buffer, whose step is a launch per run of them,
// against the same tensors apart, a launch each: the same masters, moments and model copies bit for bit, and
// the gaps the arena's alignment leaves between tensors untouched.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "tfm/backend/backend.h"
#include "tfm/ops/ops.h"
#include "tfm/train/adamw.h"

namespace tfm {
namespace {

struct Spec {
  std::string name;
  Shape shape;
};

// Decayed weights and undecayed biases and norms, every size a multiple of 4: in one buffer they make runs of
// several tensors, broken where the decay changes.
const std::vector<Spec> kAligned = {{"model.layers.0.self_attn.q_proj.weight", {4, 8}},
                                    {"model.layers.0.self_attn.k_proj.weight", {2, 8}},
                                    {"model.layers.0.self_attn.q_proj.bias", {4}},
                                    {"model.layers.0.self_attn.k_proj.bias", {8}},
                                    {"model.layers.0.input_layernorm.weight", {8}},
                                    {"model.layers.0.mlp.down_proj.weight", {8, 4}},
                                    {"model.norm.weight", {8}}};

// Sizes that are not multiples of 4 leave gaps in the buffer: b and c make a run that ends in one.
const std::vector<Spec> kPadded = {
    {"a.weight", {2, 3}}, {"b.weight", {2, 4}}, {"c.weight", {3}}, {"d.bias", {5}}, {"e.bias", {4}}};

constexpr float kGap = 7.f;

Tensor values_of(size_t tensor, const Shape& shape) {
  std::mt19937 rng(static_cast<uint32_t>(tensor));
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  Tensor t = Tensor::cpu(shape, DType::float32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// Each tensor in its own allocation.
std::vector<TrainedTensor> apart(const std::vector<Spec>& specs, DType dtype) {
  std::vector<TrainedTensor> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    Tensor t = Tensor::cpu(specs[i].shape, dtype);
    ops::cast(values_of(i, specs[i].shape), t);
    out.push_back({specs[i].name, t, {}});
  }
  return out;
}

std::vector<int64_t> numels_of(const std::vector<Spec>& specs) {
  std::vector<int64_t> numels;
  for (const Spec& s : specs) numels.push_back(shape_numel(s.shape));
  return numels;
}

// Each tensor right after the one before it, and the total last, as arena_offsets gives them.
std::vector<int64_t> packed_offsets(const std::vector<Spec>& specs) {
  std::vector<int64_t> offsets{0};
  for (const int64_t numel : numels_of(specs)) offsets.push_back(offsets.back() + numel);
  return offsets;
}

struct Buffer {
  Tensor values;  // kGap outside the tensors
  std::vector<TrainedTensor> tensors;
};

// The tensors at `offsets` in one buffer of `dtype`.
Buffer in_one_buffer(const std::vector<Spec>& specs, const std::vector<int64_t>& offsets, DType dtype) {
  Tensor gaps = Tensor::cpu({offsets.back()}, DType::float32);
  for (int64_t i = 0; i < gaps.numel(); ++i) gaps.data<float>()[i] = kGap;
  Buffer out{Tensor::cpu(gaps.shape(), dtype), {}};
  ops::cast(gaps, out.values);
  for (size_t i = 0; i < specs.size(); ++i) {
    Tensor t = out.values.narrow(offsets[i], shape_numel(specs[i].shape)).reshape(specs[i].shape);
    ops::cast(values_of(i, specs[i].shape), t);
    out.tensors.push_back({specs[i].name, t, {}});
  }
  return out;
}

// Steps with clipping on gradients drawn from the step and the tensor's place, the same for every layout.
void train(AdamW& optimizer, int steps) {
  for (int step = 1; step <= steps; ++step) {
    for (size_t i = 0; i < optimizer.entries().size(); ++i) {
      const Tensor& g = optimizer.entries()[i].grad;
      std::mt19937 rng(static_cast<uint32_t>(step * 1000 + i));
      std::uniform_real_distribution<float> dist(-2.f, 2.f);
      for (int64_t k = 0; k < g.numel(); ++k) g.data<float>()[k] = dist(rng);
    }
    optimizer.clip_grad_norm(1.0);
    optimizer.step(1e-2);
  }
}

void expect_same_state(const AdamW& got, const AdamW& want, DType dtype) {
  ASSERT_EQ(got.entries().size(), want.entries().size());
  for (size_t i = 0; i < want.entries().size(); ++i) {
    const AdamW::Entry &g = got.entries()[i], &w = want.entries()[i];
    ASSERT_EQ(g.name, w.name);
    for (const auto& [x, y, what] : {std::tuple{&g.master, &w.master, "master"},
                                     {&g.exp_avg, &w.exp_avg, "exp_avg"},
                                     {&g.exp_avg_sq, &w.exp_avg_sq, "exp_avg_sq"},
                                     {&g.param, &w.param, "param"}}) {
      ASSERT_EQ(x->nbytes(), y->nbytes()) << w.name << " " << what;
      EXPECT_EQ(std::memcmp(x->raw(), y->raw(), y->nbytes()), 0)
          << w.name << " " << what << " in " << dtype_name(dtype);
    }
  }
}

class AdamWLayouts : public ::testing::TestWithParam<DType> {};

TEST_P(AdamWLayouts, TensorsInOneBufferStepAsTensorsApart) {
  const AdamWOptions options{.weight_decay = 0.1};
  AdamW joined(options, in_one_buffer(kAligned, arena_offsets(numels_of(kAligned)), GetParam()).tensors),
      separate(options, apart(kAligned, GetParam()));
  train(joined, 4);
  train(separate, 4);
  expect_same_state(joined, separate, GetParam());
}

TEST_P(AdamWLayouts, GapsBetweenTensorsInOneBufferAreNotWritten) {
  const AdamWOptions options{.weight_decay = 0.1};
  const Buffer buffer = in_one_buffer(kPadded, arena_offsets(numels_of(kPadded)), GetParam());
  AdamW joined(options, buffer.tensors), separate(options, apart(kPadded, GetParam()));
  train(joined, 3);
  train(separate, 3);
  expect_same_state(joined, separate, GetParam());

  Tensor values = Tensor::cpu(buffer.values.shape(), DType::float32);
  ops::cast(buffer.values, values);
  std::vector<bool> covered(static_cast<size_t>(values.numel()));
  for (const AdamW::Entry& e : joined.entries())
    for (int64_t i = 0; i < e.param.numel(); ++i) covered[static_cast<size_t>(e.param.offset() + i)] = true;
  int gaps = 0;
  for (int64_t i = 0; i < values.numel(); ++i) {
    if (covered[static_cast<size_t>(i)]) continue;
    EXPECT_EQ(values.data<float>()[i], kGap) << "element " << i << " in " << dtype_name(GetParam());
    ++gaps;
  }
  EXPECT_EQ(gaps, 2 + 1 + 3);  // after a (6 of 8), c (3 of 4) and d (5 of 8)
}

// Tensors end to end in the model's storage but not in the arenas, which pad them to multiples of 4.
TEST_P(AdamWLayouts, TensorsPackedTighterThanTheArenasStepAsTensorsApart) {
  const AdamWOptions options{.weight_decay = 0.1};
  AdamW joined(options, in_one_buffer(kPadded, packed_offsets(kPadded), GetParam()).tensors),
      separate(options, apart(kPadded, GetParam()));
  train(joined, 3);
  train(separate, 3);
  expect_same_state(joined, separate, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AdamWLayouts, ::testing::Values(DType::bfloat16, DType::float32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace tfm

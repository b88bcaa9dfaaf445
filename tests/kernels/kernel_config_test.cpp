// The kernel registry's lookups and KernelConfig / use_kernels as a model applies them: which variant each
// layer kind runs per device, dtype and mode, and the errors for what does not exist.
#include <gtest/gtest.h>

#include <cstring>

#include "../model/parity_fixtures.h"
#include "../support/random_tensor.h"
#include "tfm/backend/backend.h"
#include "tfm/backend/kernel_registry.h"
#include "tfm/backend/op_set.h"
#include "tfm/core/error.h"
#include "tfm/ops/kernel_config.h"

namespace tfm {
namespace {

// Kernels that only record that they ran.
int g_ran = 0;
void record_rms_norm(const op::RmsNorm&) {
  g_ran = 1;
}
void record_rms_norm_fast(const op::RmsNorm&) {
  g_ran = 2;
}
void record_add_rms_norm(const op::AddRmsNorm&) {
  g_ran = 3;
}
void record_linear(const op::Linear&) {
  g_ran = 4;
}
bool small_only(const op::RmsNorm& a) {
  return a.x.numel() <= 4;
}

// A registry of its own: RMSNorm has a default and "fast" (inference only, up to 4 elements) on the cpu in
// float32, AddRmsNorm a "fused" on cpu and cuda, Linear a default on the cpu.
class TestRegistry : public KernelRegistry {
 public:
  TestRegistry() {
    add<op::RmsNorm>(DeviceType::cpu, DType::float32, "default", {.run = record_rms_norm, .is_default = true});
    add<op::RmsNorm>(DeviceType::cpu, DType::float32, "fast",
                     {.run = record_rms_norm_fast, .supports = small_only, .modes = uint8_t(KernelMode::inference)});
    add<op::AddRmsNorm>(DeviceType::cpu, DType::float32, "fused", {.run = record_add_rms_norm, .is_default = true});
    add<op::AddRmsNorm>(DeviceType::cuda, DType::bfloat16, "fused", {.run = record_add_rms_norm, .is_default = true});
    add<op::Linear>(DeviceType::cpu, DType::float32, "default", {.run = record_linear, .is_default = true});
  }
};

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(KernelRegistry, RunsTheVariantThatAcceptsTheArgumentsElseTheDefault) {
  TestRegistry r;
  Tensor small = Tensor::cpu({1, 4}, DType::float32), large = Tensor::cpu({2, 4}, DType::float32);
  const Tensor weight = Tensor::cpu({4}, DType::float32);
  r.run(op::RmsNorm{small, weight, 1e-6f, small}, DeviceType::cpu, "fast");
  EXPECT_EQ(g_ran, 2);
  r.run(op::RmsNorm{large, weight, 1e-6f, large}, DeviceType::cpu, "fast");  // refused: the default runs
  EXPECT_EQ(g_ran, 1);
  r.run(op::RmsNorm{small, weight, 1e-6f, small}, DeviceType::cpu, "no-such-variant");
  EXPECT_EQ(g_ran, 1);
  EXPECT_TRUE(r.supports(op::RmsNorm{small, weight, 1e-6f, small}, DeviceType::cpu, "fast"));
  EXPECT_FALSE(r.supports(op::RmsNorm{large, weight, 1e-6f, large}, DeviceType::cpu, "fast"));
}

TEST(KernelRegistry, MissingKernelsNameOpDeviceAndDtype) {
  TestRegistry r;
  Tensor x = Tensor::cpu({1, 4}, DType::bfloat16);
  const Tensor w = Tensor::cpu({4}, DType::bfloat16);
  EXPECT_EQ(error_of([&] { r.run(op::RmsNorm{x, w, 1e-6f, x}, DeviceType::cpu); }),
            "rms_norm has no cpu kernel for bfloat16; it has kernels for float32");
  EXPECT_EQ(error_of([&] { r.run(op::RmsNorm{x, w, 1e-6f, x}, DeviceType::xpu); }),
            "rms_norm has no xpu kernel for bfloat16 (none for that device)");
}

TEST(KernelRegistry, RefusesADuplicateOrASecondDefault) {
  TestRegistry r;
  EXPECT_THROW(r.add<op::RmsNorm>(DeviceType::cpu, DType::float32, "fast", {.run = record_rms_norm}), Error);
  EXPECT_THROW(
      r.add<op::RmsNorm>(DeviceType::cpu, DType::float32, "other", {.run = record_rms_norm, .is_default = true}),
      Error);
  r.add<op::RmsNorm>(DeviceType::cuda, DType::float32, "only", {.run = record_rms_norm});
  EXPECT_THROW(r.check_complete(), Error);  // cuda float32 rms_norm has no default
}

TEST(KernelRegistry, TheBuiltInRegistryIsComplete) {
  EXPECT_NO_THROW(kernel_registry().check_complete());
  EXPECT_FALSE(kernel_registry().list().empty());
}

// A reader that fails in one piece of many fails the copy with its own error, out of the parallel region.
TEST(HostReader, AFailingPieceFailsTheCopyWithItsError) {
  const Tensor dst = Tensor::cpu({int64_t{8} << 20}, DType::uint8);
  const HostReader read = [](void* out, size_t offset, size_t bytes) {
    if (offset >= (size_t{5} << 20)) throw_error("piece at ", offset, " cannot be read");
    std::memset(out, 1, bytes);
  };
  EXPECT_EQ(error_of([&] { copy_from_reader(dst, read); }).find("cannot be read") != std::string::npos, true);
  const HostReader ones = [](void* out, size_t, size_t bytes) { std::memset(out, 1, bytes); };
  copy_from_reader(dst, ones);
  for (int64_t i = 0; i < dst.numel(); i += 4099) ASSERT_EQ(dst.data<uint8_t>()[i], 1);
}

// norm_linear (what a decode layer folds with use_kernels) on the cpu: the ops it folds, one after another, with
// the residual stream's sum in a buffer of its own; a shape mismatch names the op, and more rows than a decode
// step has leave the ops to the layer.
TEST(NormLinear, IsAddRmsNormLinearAndSiluMulWithTheNewResidualApart) {
  std::mt19937 rng(7);
  const int64_t M = 3, K = 16, N = 10;
  const Tensor residual = test_support::random_tensor({M, K}, DType::float32, rng);
  const Tensor x = test_support::random_tensor({M, K}, DType::float32, rng);
  const Tensor norm = test_support::random_tensor({K}, DType::float32, rng);
  const Tensor w = test_support::random_tensor({N, K}, DType::float32, rng);
  const Tensor bias = test_support::random_tensor({N}, DType::float32, rng);
  Tensor residual_out = Tensor::cpu({M, K}, DType::float32), y = Tensor::cpu({M, N / 2}, DType::float32);
  ASSERT_TRUE(ops::norm_linear(residual, x, norm, 1e-6f, w, bias, true, residual_out, y, "fused"));

  Tensor summed = clone(residual), normed = Tensor::cpu({M, K}, DType::float32);
  Tensor gate_up = Tensor::cpu({M, N}, DType::float32), act = Tensor::cpu({M, N / 2}, DType::float32);
  ops::add_rms_norm(summed, x, norm, 1e-6f, normed, "fused");
  ops::linear(normed, w, bias, gate_up);
  ops::silu_mul(gate_up, act);
  EXPECT_EQ(std::memcmp(residual_out.raw(), summed.raw(), summed.nbytes()), 0);
  EXPECT_EQ(std::memcmp(y.raw(), act.raw(), act.nbytes()), 0);
  EXPECT_NE(std::memcmp(residual.raw(), summed.raw(), summed.nbytes()), 0) << "the residual itself is kept";

  // Without the norm (the layer ran it apart), the gate alone folds: silu_mul(linear(rows)).
  Tensor unused, gated = Tensor::cpu({M, N / 2}, DType::float32);
  ASSERT_TRUE(ops::norm_linear(normed, Tensor(), Tensor(), 0.f, w, bias, true, unused, gated, "fused"));
  EXPECT_EQ(std::memcmp(gated.raw(), act.raw(), act.nbytes()), 0);
  EXPECT_NE(error_of([&] {
              ops::norm_linear(residual, x, Tensor(), 0.f, w, bias, true, residual_out, y, "");
            }).find("needs the norm after it"),
            std::string::npos);

  Tensor wrong = Tensor::cpu({M, N}, DType::float32);
  EXPECT_NE(error_of([&] { ops::norm_linear(residual, x, norm, 1e-6f, w, bias, true, residual_out, wrong, ""); })
                .find("norm_linear: shapes"),
            std::string::npos);
  const Tensor many = test_support::random_tensor({op::NormLinear::kMaxRows + 1, K}, DType::float32, rng);
  Tensor many_out = Tensor::cpu(many.shape(), DType::float32);
  Tensor many_y = Tensor::cpu({many.size(0), N}, DType::float32);
  EXPECT_FALSE(ops::norm_linear(many, many, norm, 1e-6f, w, bias, false, many_out, many_y, "fused"));
}

TEST(KernelConfig, UnknownLayersDevicesModesAndVariantsAreErrorsListingWhatExists) {
  TestRegistry r;
  auto parse = [&](const char* text) { return KernelConfig::from_json(json::parse(text), r); };
  EXPECT_EQ(error_of([&] { parse(R"({"LayerNorm": "fast"})"); }),
            "KernelConfig: 'LayerNorm' is not a layer kind tfm has kernels for; layer kinds: Linear, RMSNorm");
  EXPECT_EQ(error_of([&] { parse(R"({"RMSNorm": {"rocm": "fast"}})"); }),
            "KernelConfig: device 'rocm' (for RMSNorm) is not one tfm runs on: cpu, cuda, xpu");
  EXPECT_EQ(error_of([&] { parse(R"({"RMSNorm": {"cpu": {"eval": "fast"}}})"); }),
            "KernelConfig: mode 'eval' (for RMSNorm) is neither 'inference' nor 'training'");
  EXPECT_EQ(error_of([&] { parse(R"({"RMSNorm": {"cpu": "faster"}})"); }),
            "KernelConfig: RMSNorm has no variant 'faster' on cpu; variants: default, fast, fused");
  EXPECT_EQ(error_of([&] { parse(R"({"RMSNorm": {"xpu": "fast"}})"); }),
            "KernelConfig: RMSNorm has no variant 'fast' on xpu; it has no kernels there");
  EXPECT_EQ(error_of([&] { parse(R"({"RMSNorm": "faster"})"); }),
            "KernelConfig: RMSNorm has no variant 'faster' on any device; variants: default, fast, fused");
  EXPECT_EQ(error_of([&] { parse(R"({"RMSNorm": 3})"); }),
            "KernelConfig: RMSNorm must map to a variant or to an object keyed by device, got an integer");
  EXPECT_EQ(error_of([&] { parse(R"({"RMSNorm": {"cpu": ["fast"]}})"); }),
            "KernelConfig: the variant for RMSNorm must be a string, got an array");
  EXPECT_EQ(error_of([&] { parse(R"(["RMSNorm"])"); }),
            "KernelConfig: the mapping must be a JSON object of layer kinds, got an array");
}

TEST(KernelConfig, TheMostSpecificEntryWins) {
  TestRegistry r;
  const KernelConfig c = KernelConfig::from_json(
      json::parse(R"({"RMSNorm": "fused", "Linear": {"cpu": "default"}})"), r);
  EXPECT_EQ(c.variant("RMSNorm", DeviceType::cuda, KernelMode::training), "fused");
  EXPECT_EQ(c.variant("Linear", DeviceType::cpu, KernelMode::inference), "default");
  EXPECT_FALSE(c.variant("Linear", DeviceType::cuda, KernelMode::inference).has_value());
  const KernelConfig d =
      KernelConfig::from_json(json::parse(R"({"RMSNorm": {"cpu": {"inference": "fast", "training": "default"}}})"), r);
  EXPECT_EQ(d.variant("RMSNorm", DeviceType::cpu, KernelMode::inference), "fast");
  EXPECT_EQ(d.variant("RMSNorm", DeviceType::cpu, KernelMode::training), "default");
}

TEST(KernelConfig, ResolvesPerDeviceDtypeAndModeWithKernelizesFallback) {
  TestRegistry r;
  const KernelConfig fast = KernelConfig::from_json(json::parse(R"({"RMSNorm": {"cpu": "fast"}})"), r);
  EXPECT_EQ(resolve_layer_kernels(fast, true, DeviceType::cpu, DType::float32, KernelMode::inference, r).of("RMSNorm"),
            "fast");
  // "fast" serves inference only: in training the layer keeps its default.
  EXPECT_EQ(resolve_layer_kernels(fast, true, DeviceType::cpu, DType::float32, KernelMode::training, r).of("RMSNorm"),
            "");
  // A variant that exists on the device but not in the dtype is an error naming the dtype.
  EXPECT_EQ(error_of([&] { resolve_layer_kernels(fast, true, DeviceType::cpu, DType::bfloat16, KernelMode::inference, r); }),
            "KernelConfig: RMSNorm's variant 'fast' has no cpu kernel for bfloat16");
  // use_kernels alone applies the built-in mapping (RMSNorm -> fused) where the device has it.
  EXPECT_EQ(resolve_layer_kernels({}, true, DeviceType::cuda, DType::bfloat16, KernelMode::inference, r).of("RMSNorm"),
            "fused");
  EXPECT_EQ(resolve_layer_kernels({}, true, DeviceType::cpu, DType::bfloat16, KernelMode::inference, r).of("RMSNorm"),
            "");
  EXPECT_EQ(resolve_layer_kernels({}, false, DeviceType::cuda, DType::bfloat16, KernelMode::inference, r).of("RMSNorm"),
            "");
}

TEST(KernelConfig, ParsesInlineJsonOrAFile) {
  EXPECT_EQ(KernelConfig::parse(R"( {"Linear": {"cpu": "reference"}})").variant("Linear", DeviceType::cpu,
                                                                                  KernelMode::inference),
            "reference");
  EXPECT_THROW(KernelConfig::parse("/no/such/kernels.json"), Error);
  EXPECT_THROW(KernelConfig::parse("{\"Linear\": "), Error);
}

// Logits of the fixture's prompt of 20 tokens, in `dtype`, with `options` applied.
std::vector<float> logits_of(CausalLM& model, const std::vector<int64_t>& ids) {
  KVCache cache = model.make_cache(blocks_for(static_cast<int64_t>(ids.size()), 4), 4);
  SequenceCache seq;
  BatchBuilder builder(cache);
  builder.add(seq, ids, Logits::last);
  const Tensor logits = model.forward(builder.finish(), cache);
  return {logits.data<float>(), logits.data<float>() + logits.numel()};
}

TEST(ModelKernels, UseKernelsRunsTheBuiltInVariantsWithTheSameLogits) {
  const std::vector<int64_t> ids = parity::reference("qwen3_head_dim_sliding")[2].ids;
  for (const char* dtype : {"float32", "bfloat16"}) {
    CausalLM plain = CausalLM::from_pretrained(parity::kFixtures + "qwen3_head_dim_sliding", {.dtype = dtype});
    CausalLM kernelized = CausalLM::from_pretrained(parity::kFixtures + "qwen3_head_dim_sliding",
                                                    {.dtype = dtype, .use_kernels = true});
    EXPECT_EQ(plain.layer_kernels().of("RMSNorm"), "");
    EXPECT_EQ(kernelized.layer_kernels().of("RMSNorm"), "fused");
    // The fused residual add and norm compute the same roundings in the same order: identical logits.
    EXPECT_EQ(logits_of(plain, ids), logits_of(kernelized, ids)) << dtype;
  }
}

TEST(ModelKernels, TrainAndEvalReResolveTheKernelsAndDisablingRestoresTheDefaults) {
  const KernelConfig config =
      KernelConfig::parse(R"({"Linear": {"cpu": {"inference": "reference"}}, "RMSNorm": "fused"})");
  CausalLM model = CausalLM::from_pretrained(parity::kFixtures + "llama_gqa",
                                             {.dtype = "float32", .kernel_config = config});
  EXPECT_FALSE(model.training());
  EXPECT_EQ(model.layer_kernels().of("Linear"), "reference");
  model.train();
  EXPECT_TRUE(model.training());
  EXPECT_EQ(model.layer_kernels().of("Linear"), "");  // mapped for inference only
  EXPECT_EQ(model.layer_kernels().of("RMSNorm"), "fused");
  model.eval();
  EXPECT_EQ(model.layer_kernels().of("Linear"), "reference");
  model.set_use_kernels(false);
  EXPECT_EQ(model.layer_kernels().of("Linear"), "");
  EXPECT_EQ(model.layer_kernels().of("RMSNorm"), "");
}

TEST(ModelKernels, AKernelConfigForAttentionOverridesTheAttnImplementation) {
  const std::vector<int64_t> ids = parity::reference("llama_gqa")[2].ids;
  CausalLM eager = CausalLM::from_pretrained(parity::kFixtures + "llama_gqa",
                                             {.dtype = "bfloat16", .attn_implementation = "eager"});
  CausalLM configured = CausalLM::from_pretrained(
      parity::kFixtures + "llama_gqa",
      {.dtype = "bfloat16", .attn_implementation = "sdpa", .kernel_config = KernelConfig::parse(R"({"Attention": "eager"})")});
  CausalLM sdpa = CausalLM::from_pretrained(parity::kFixtures + "llama_gqa", {.dtype = "bfloat16"});
  EXPECT_EQ(eager.layer_kernels().of("Attention"), "eager");
  EXPECT_EQ(sdpa.layer_kernels().of("Attention"), "flash");
  EXPECT_EQ(logits_of(configured, ids), logits_of(eager, ids));
  EXPECT_NE(logits_of(sdpa, ids), logits_of(eager, ids));  // the two forms round differently in bf16
}

}  // namespace
}  // namespace tfm

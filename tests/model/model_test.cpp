// What a loaded model holds: weights in the dtype asked for (half the memory in bf16), activations kept for a
// backward pass only when asked, and clear errors for dtypes that cannot run.
#include <gtest/gtest.h>

#include "parity_fixtures.h"
#include "support/error_of.h"
#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/core/floats.h"
#include "tfm/io/checkpoint.h"
#include "tfm/model/layers.h"

namespace tfm {
namespace {

using parity::kFixtures;

TEST(Model, BFloat16WeightsTakeHalfTheMemoryOfFloat32) {
  Backend& cpu = *find_backend(DeviceType::cpu);
  const size_t before = cpu.memory_allocated(0);
  CausalLM f32 = CausalLM::from_pretrained(kFixtures + "qwen3_head_dim_sliding", {.dtype = "float32"});
  const size_t f32_allocated = cpu.memory_allocated(0) - before;
  CausalLM bf16 = CausalLM::from_pretrained(kFixtures + "qwen3_head_dim_sliding", {.dtype = "bfloat16"});
  const size_t bf16_allocated = cpu.memory_allocated(0) - before - f32_allocated;
  EXPECT_EQ(bf16.weight_bytes() * 2, f32.weight_bytes());
  EXPECT_GE(f32_allocated, f32.weight_bytes());  // a bf16 checkpoint as float32: every weight converted
  // In the checkpoint's own dtype the cpu keeps viewing the file; only the fused q/k/v and gate/up are new.
  EXPECT_LT(bf16_allocated, f32_allocated / 2);
  EXPECT_GT(bf16_allocated, 0u);
}

TEST(Model, ComputesInTheDtypeAskedForAndTheConfigsForAuto) {
  CausalLM automatic = CausalLM::from_pretrained(kFixtures + "llama_gqa", {});
  EXPECT_EQ(automatic.dtype(), DType::bfloat16);  // config.json's dtype
  CausalLM half = CausalLM::from_pretrained(kFixtures + "llama_gqa", {.dtype = "float16"});
  EXPECT_EQ(half.dtype(), DType::float16);
  EXPECT_EQ(half.make_cache(2, 4).layers[0].key.dtype(), DType::float16);
}

TEST(Model, DtypesThatCannotRunAreErrorsNamingThem) {
  auto error_of = [](const std::string& dtype) {
    try {
      CausalLM::from_pretrained(kFixtures + "llama_gqa", {.dtype = dtype});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(
      error_of("int8"),
      "LlamaForCausalLM cannot be instantiated under `dtype=torch.int8` as it's not a floating-point dtype");
  EXPECT_EQ(error_of("float64"), "cpu cannot run models in float64 (tfm computes in float32, bfloat16 and float16)");
  EXPECT_EQ(error_of("float8_e5m2"),
            "cpu cannot run models in float8_e5m2 (tfm computes in float32, bfloat16 and float16)");
}

// A block count past int32 once wrapped around into a small or negative one.
TEST(Model, AKVCacheTfmCannotAddressIsAnErrorNamingIt) {
  CausalLM model = CausalLM::from_pretrained(kFixtures + "llama_gqa", {.dtype = "float32"});
  for (const int64_t blocks : {int64_t{1} << 40, int64_t{1} << 27}) {
    const std::string error = test_support::error_of([&] { model.make_cache(blocks); });
    EXPECT_EQ(error.rfind("a KV cache of " + std::to_string(blocks) + " blocks of 16 tokens (", 0), 0u)
        << error;
    EXPECT_TRUE(error.ends_with(" on cpu) holds more tokens than tfm addresses (2147483647)")) << error;
  }
}

TEST(Model, KeepsWhatABackwardNeedsOnlyWhenAsked) {
  CausalLM model = CausalLM::from_pretrained(kFixtures + "llama_gqa", {.dtype = "float32"});
  const std::vector<int64_t> ids = parity::reference("llama_gqa")[1].ids;
  auto run = [&](SavedActivations* saved) {
    KVCache cache = model.make_cache(4, 4);
    SequenceCache seq;
    BatchBuilder builder(cache);
    builder.add(seq, ids, Logits::last);
    const Tensor logits = model.forward(builder.finish(), cache, saved);
    return std::vector<float>(logits.data<float>(), logits.data<float>() + logits.numel());
  };
  const size_t before = host_tensor_bytes();
  const std::vector<float> plain = run(nullptr);
  EXPECT_EQ(host_tensor_bytes(), before);  // nothing kept
  SavedActivations saved;
  EXPECT_EQ(run(&saved), plain);
  // Every linear keeps its input; attention its rotated queries; norms theirs.
  const int64_t T = static_cast<int64_t>(ids.size());
  const Tensor* down = saved.find("model.layers.1.mlp.down_proj.input");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->shape(), (Shape{T, model.config().intermediate_size}));
  ASSERT_NE(saved.find("model.layers.0.self_attn.query"), nullptr);
  EXPECT_EQ(saved.find("model.layers.0.self_attn.query")->shape(), (Shape{T, 4, 16}));
  EXPECT_NE(saved.find("model.embed_tokens.input"), nullptr);
  EXPECT_GT(host_tensor_bytes(), before);
  // The first norm's input is the token embeddings, row by row as the checkpoint holds them.
  const Tensor* embedded = saved.find("model.layers.0.input_layernorm.input");
  ASSERT_NE(embedded, nullptr);
  const Tensor table = Checkpoint::open(kFixtures + "llama_gqa").get("model.embed_tokens.weight");
  const int64_t H = table.size(1);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < H; ++i) {
      ASSERT_EQ(embedded->data<float>()[t * H + i], bf16_to_float(table.data<uint16_t>()[ids[t] * H + i]));
    }
  }
  saved.clear();
  EXPECT_EQ(host_tensor_bytes(), before);
}

}  // namespace
}  // namespace tfm

// LoRA adapters on the fixture models: adapter_config.json as PEFT reads and writes it, the adapted forward
// against the merged model's, the backward against central differences of the loss, the adapter folder's
// round trip, its errors, and (once tests/fixtures/make_lora_references.py has run) the logits PEFT gave.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "parity_fixtures.h"
#include "support/error_of.h"
#include "tfm/backend/backend.h"
#include "tfm/io/file.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/lora.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;
using parity::kFixtures;
using test_support::error_of;

const std::string kLoraFixtures = std::string(TFM_SOURCE_DIR) + "/tests/fixtures/lora/";
const std::vector<int64_t> kTokens = {5, 17, 99, 3, 250, 42, 7, 311};

CausalLM load(const std::string& name) {
  return CausalLM::from_pretrained(kFixtures + name, {.dtype = "float32", .progress = false});
}

LoraConfig config_of(const std::string& json) {
  return LoraConfig::from_json(json::parse(json));
}

// B starts at zero (the adapted model is the base model); random values make the adapters do something.
void randomize_b(CausalLM& model, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  for (auto& [name, t] : lora_tensors(model))
    if (name.ends_with("lora_B.weight"))
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
}

Tensor logits_of(CausalLM& model, const std::vector<int64_t>& ids) {
  KVCache cache = model.make_cache(blocks_for(static_cast<int64_t>(ids.size()), 4), 4);
  SequenceCache seq;
  BatchBuilder builder(cache);
  builder.add(seq, ids, Logits::all);
  return model.forward(builder.finish(), cache);
}

double max_relative_difference(const Tensor& a, const Tensor& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::fabs(double{a.data<float>()[i]} - b.data<float>()[i]));
    scale = std::max(scale, std::fabs(double{b.data<float>()[i]}));
  }
  return diff / scale;
}

fs::path temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tfm_lora_test_" + name + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

TEST(LoraConfig, MatchesModulesAsPeft) {
  const LoraConfig names = config_of(R"({"target_modules": ["q_proj", "model.layers.1.mlp.down_proj"]})");
  EXPECT_TRUE(names.targets("model.layers.0.self_attn.q_proj"));
  EXPECT_FALSE(names.targets("model.layers.0.self_attn.k_proj"));
  EXPECT_TRUE(names.targets("model.layers.1.mlp.down_proj"));
  EXPECT_FALSE(names.targets("model.layers.0.mlp.down_proj"));
  EXPECT_FALSE(names.targets("model.layers.0.self_attn.xq_proj"));  // a suffix must follow a dot

  const LoraConfig regex = config_of(R"({"target_modules": ".*\\.(q|v)_proj"})");
  EXPECT_TRUE(regex.targets("model.layers.3.self_attn.v_proj"));
  EXPECT_FALSE(regex.targets("model.layers.3.self_attn.o_proj"));
  EXPECT_FALSE(config_of(R"({"target_modules": "q_proj"})").targets("model.layers.0.self_attn.q_proj"));

  const LoraConfig all = config_of(R"({"target_modules": "all-linear", "exclude_modules": ["o_proj"]})");
  EXPECT_TRUE(all.targets("model.layers.0.mlp.gate_proj"));
  EXPECT_FALSE(all.targets("model.layers.0.self_attn.o_proj"));

  const LoraConfig defaults = config_of("{}");  // PEFT's mapping for Llama, Mistral, Qwen2 and Qwen3
  EXPECT_TRUE(defaults.targets("model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(defaults.targets("model.layers.0.self_attn.v_proj"));
  EXPECT_FALSE(defaults.targets("model.layers.0.self_attn.k_proj"));
}

TEST(LoraConfig, ScalingFollowsRankAlphaPatternsAndRslora) {
  const LoraConfig c = config_of(
      R"({"r": 8, "lora_alpha": 16, "rank_pattern": {"v_proj": 4}, "alpha_pattern": {"layers\\.1\\..*": 2}})");
  EXPECT_EQ(c.rank_of("model.layers.0.self_attn.q_proj"), 8);
  EXPECT_EQ(c.rank_of("model.layers.0.self_attn.v_proj"), 4);
  EXPECT_FLOAT_EQ(c.scaling_of("model.layers.0.self_attn.q_proj"), 2.f);
  EXPECT_FLOAT_EQ(c.scaling_of("model.layers.0.self_attn.v_proj"), 4.f);
  EXPECT_FLOAT_EQ(c.scaling_of("model.layers.1.self_attn.v_proj"), 0.5f);
  EXPECT_FLOAT_EQ(config_of(R"({"r": 16, "lora_alpha": 8, "use_rslora": true})").scaling_of("x.q_proj"), 2.f);
}

TEST(LoraConfig, FieldsTfmDoesNotImplementAreErrorsNamingThem) {
  EXPECT_NE(error_of([] { config_of(R"({"use_dora": true})"); }).find("use_dora"), std::string::npos);
  EXPECT_NE(error_of([] { config_of(R"({"fan_in_fan_out": true})"); }).find("fan_in_fan_out"),
            std::string::npos);
  EXPECT_NE(error_of([] { config_of(R"({"bias": "all"})"); }).find("bias \"all\""), std::string::npos);
  EXPECT_NE(error_of([] { config_of(R"({"peft_type": "IA3"})"); }).find("peft_type \"IA3\""), std::string::npos);
  EXPECT_NE(error_of([] { config_of(R"({"peft_type": 3})"); }).find("peft_type 3 is not LORA"), std::string::npos);
  EXPECT_NE(error_of([] { config_of(R"({"bias": false})"); }).find("bias false is not supported"),
            std::string::npos);
  EXPECT_NE(error_of([] { config_of(R"({"r": 0})"); }).find("r = 0"), std::string::npos);
  EXPECT_EQ(
      error_of([] { config_of(R"({"use_dora": false, "modules_to_save": null, "loftq_config": {}})"); }),
      "(no error)");
}

// Module patterns come from downloaded adapters: one that backtracks without bound gives up with an error
// naming the field (PCRE2's match limit) instead of running for hours, and one that does not compile names it.
TEST(LoraConfig, AHostileModulePatternIsAnErrorNotAHang) {
  const std::string module = "model.layers.0.self_attn.q_proj.model.layers.0.self_attn";
  const LoraConfig exponential = config_of(R"({"target_modules": "(([a-z_.0-9]|[a-z_.0-9])*)*[0-9]{3}"})");
  const std::string hostile = error_of([&] { exponential.targets(module); });
  EXPECT_NE(hostile.find("LoRA target_modules"), std::string::npos) << hostile;
  EXPECT_NE(hostile.find("limit"), std::string::npos) << hostile;
  const std::string broken = error_of([] { config_of(R"({"rank_pattern": {"(q": 4}})").rank_of("x.q_proj"); });
  EXPECT_NE(broken.find("LoRA rank_pattern: invalid regex"), std::string::npos) << broken;
}

TEST(LoraConfig, WritesPeftsFieldsAndReadsThemBack) {
  LoraConfig c = config_of(R"({"r": 4, "lora_alpha": 32, "lora_dropout": 0.05, "target_modules": ["v_proj",
      "q_proj"], "base_model_name_or_path": "m"})");
  const json::Value j = c.to_json();
  EXPECT_EQ(j.at("peft_type").as_string(), "LORA");
  EXPECT_EQ(j.at("task_type").as_string(), "CAUSAL_LM");
  EXPECT_TRUE(j.at("lora_alpha").is_int());
  EXPECT_EQ(json::dump_compact(j.at("target_modules")), R"(["q_proj","v_proj"])");
  const LoraConfig back = LoraConfig::from_json(j);
  EXPECT_EQ(back.r, 4);
  EXPECT_EQ(back.lora_alpha, 32);
  EXPECT_EQ(back.lora_dropout, 0.05);
  EXPECT_EQ(back.base_model_name_or_path, "m");
  EXPECT_EQ(json::dump_compact(back.to_json()), json::dump_compact(j));
}

TEST(Lora, NewAdaptersLeaveTheModelAsItWas) {
  CausalLM model = load("llama_gqa");
  const Tensor before = logits_of(model, kTokens);
  const auto trainable = attach_lora(model, config_of(R"({"target_modules": "all-linear"})"), 1);
  EXPECT_EQ(trainable.size(), 2u * 7 * 2);  // A and B of 7 modules in each of 2 layers
  EXPECT_EQ(trainable[0].first, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  EXPECT_EQ(max_relative_difference(logits_of(model, kTokens), before), 0.0);
}

TEST(Lora, AdaptedForwardEqualsTheMergedModels) {
  for (const std::string name : {"llama_gqa", "qwen2_tied_sharded", "qwen3_head_dim_sliding"}) {
    CausalLM model = load(name);
    const Tensor base = logits_of(model, kTokens);
    attach_lora(model,
                config_of(R"({"r": 4, "lora_alpha": 8, "target_modules": ["k_proj", "o_proj", "up_proj"]})"),
                7);
    randomize_b(model, 3);
    const Tensor adapted = logits_of(model, kTokens);
    EXPECT_GT(max_relative_difference(adapted, base), 1e-3) << name << ": the adapters change nothing";
    merge_adapter(model);
    EXPECT_TRUE(lora_tensors(model).empty());
    EXPECT_LT(max_relative_difference(logits_of(model, kTokens), adapted), 1e-5) << name;
  }
}

// One adapter on a fused Linear, and several of different ranks and scalings on each (q, k and v on
// qkv_proj, gate and up on gate_up_proj: their A's and B's stacked into one product each). Batches of up to
// op::NormLinear::kMaxRows rows add the adapters' products onto the base's, longer ones the base's last
// (LoraWeight::base_added_last): both are checked.
class LoraBackward : public ::testing::TestWithParam<const char*> {};

TEST_P(LoraBackward, MatchesDifferencesOfTheLoss) {
  CausalLM model = load("qwen2_tied_sharded");
  const auto trainable = attach_lora(model, config_of(GetParam()), 5);
  randomize_b(model, 9);
  const std::vector<TrainingExample> examples = {{{5, 17, 99, 3, 250}, {5, 17, 99, 3, 250}},
                                                 {{42, 7, 311}, {-100, 7, 311}},
                                                 {{8, 64, 120, 9}, {8, 64, -100, 9}}};
  for (const std::vector<const TrainingExample*>& batch :
       {std::vector{&examples[0], &examples[1]}, std::vector{&examples[0], &examples[1], &examples[2]}}) {
    Gradients grads;
    for (const auto& [name, t] : trainable) grads.add(name, Tensor::cpu(t.shape(), DType::float32));
    model.forward_backward(batch, 1.f, grads);
    auto loss = [&] { return model.loss(batch).loss_sum; };
    for (const auto& [name, t] : trainable) {
      const Tensor g = grads.of(name);
      for (int64_t i : {int64_t{0}, t.numel() / 2, t.numel() - 1}) {
        float& v = t.data<float>()[i];
        const float keep = v, h = 1e-2f;
        v = keep + h;
        const double up = loss();
        v = keep - h;
        const double down = loss();
        v = keep;
        const double numeric = (up - down) / (2.0 * h);
        EXPECT_NEAR(g.data<float>()[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
            << name << " element " << i << ", " << batch.size() << " sequences";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Lora, LoraBackward,
    ::testing::Values(
        R"({"r": 2, "lora_alpha": 4, "target_modules": ["v_proj", "gate_proj"]})",
        R"({"r": 2, "lora_alpha": 4, "target_modules": "all-linear", "rank_pattern": {"k_proj": 3},
                          "alpha_pattern": {"up_proj": 2}})"));

// The optimizer takes lora_tensors in their order and keeps its gradients at arena_offsets in one arena; the
// adapters lie the same way in one buffer of the model's, so a Linear's stacked A is a view of its A's (a
// copy would have re-pointed them to it, off the buffer). Its A gradients are then the rows of one matrix
// too, which the backward writes in place: the same gradients, over two accumulating passes, as a temporary's
// rows added into them apart.
TEST(Lora, AdaptersAndTheirGradientsLieInOneBuffer) {
  CausalLM model = load("qwen2_tied_sharded");
  const auto trainable = attach_lora(
      model,
      config_of(
          R"({"r": 2, "lora_alpha": 4, "target_modules": "all-linear", "rank_pattern": {"k_proj": 3}})"),
      5);
  ASSERT_GE(trainable.size(), 4u);
  EXPECT_EQ(trainable[1].first, "base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight");
  EXPECT_EQ(trainable[2].first, "base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight");
  EXPECT_EQ(trainable[3].first, "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
  std::vector<int64_t> numels;
  for (const auto& [name, t] : trainable) numels.push_back(t.numel());
  const std::vector<int64_t> offsets = arena_offsets(numels);
  for (size_t i = 0; i < trainable.size(); ++i) {
    EXPECT_EQ(trainable[i].second.storage(), trainable[0].second.storage()) << trainable[i].first;
    EXPECT_EQ(trainable[i].second.offset() - trainable[0].second.offset(), offsets[i]) << trainable[i].first;
    EXPECT_EQ(numels[i] % 4, 0) << trainable[i].first << " leaves a gap: the A gradients are not one matrix";
  }

  randomize_b(model, 9);
  const std::vector<TrainingExample> examples = {{{5, 17, 99, 3, 250}, {5, 17, 99, 3, 250}},
                                                 {{42, 7, 311}, {-100, 7, 311}}};
  const std::vector<const TrainingExample*> batch = {&examples[0], &examples[1]};
  const Tensor arena = zeros({offsets.back()}, DType::float32, Device{});
  Gradients apart, in_arena;
  for (size_t i = 0; i < trainable.size(); ++i) {
    const auto& [name, t] = trainable[i];
    apart.add(name, Tensor::cpu(t.shape(), DType::float32));
    in_arena.add(name, arena.narrow(offsets[i], numels[i]).reshape(t.shape()));
  }
  for (int pass = 0; pass < 2; ++pass) {
    model.forward_backward(batch, 1.f, apart);
    model.forward_backward(batch, 1.f, in_arena);
  }
  for (const auto& [name, t] : trainable) {
    const Tensor want = apart.of(name), got = in_arena.of(name);
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0) << name;
  }
}

TEST(Lora, DropoutRunsOnlyInTraining) {
  CausalLM model = load("llama_gqa");
  attach_lora(model, config_of(R"({"lora_dropout": 0.5})"), 2);
  randomize_b(model, 4);
  const Tensor eval = logits_of(model, kTokens);
  EXPECT_EQ(max_relative_difference(logits_of(model, kTokens), eval), 0.0);
  model.train();
  const Tensor first = logits_of(model, kTokens), second = logits_of(model, kTokens);
  EXPECT_GT(max_relative_difference(first, eval), 1e-4);
  EXPECT_GT(max_relative_difference(second, first), 1e-4) << "each training forward draws new masks";
  model.eval();
  EXPECT_EQ(max_relative_difference(logits_of(model, kTokens), eval), 0.0);
}

TEST(Lora, SavedAdapterLoadsBackBitForBit) {
  CausalLM model = load("llama_gqa");
  LoraConfig config =
      config_of(R"({"r": 4, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj", "down_proj"]})");
  config.base_model_name_or_path = "llama_gqa";
  attach_lora(model, config, 11);
  randomize_b(model, 12);
  const fs::path dir = temp_dir("round_trip");
  save_adapter(model, config, dir.string());

  const SafetensorsFile file = SafetensorsFile::open((dir / "adapter_model.safetensors").string());
  EXPECT_EQ(file.metadata().at("format").as_string(), "pt");
  EXPECT_NE(file.find("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"), nullptr);
  const json::Value saved = json::parse_file((dir / "adapter_config.json").string());
  EXPECT_TRUE(saved.at("inference_mode").as_bool());
  EXPECT_TRUE(io::read_file((dir / "adapter_config.json").string())
                  .starts_with("{\n  \"alora_invocation_tokens\": null,\n"));

  CausalLM reloaded = load("llama_gqa");
  const LoraConfig read = load_adapter(reloaded, dir.string());
  EXPECT_EQ(read.r, 4);
  const auto want = lora_tensors(model), got = lora_tensors(reloaded);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_EQ(std::memcmp(got[i].second.raw(), want[i].second.raw(), want[i].second.nbytes()), 0)
        << got[i].first;
  }
  EXPECT_EQ(max_relative_difference(logits_of(reloaded, kTokens), logits_of(model, kTokens)), 0.0);
  fs::remove_all(dir);
}

TEST(Lora, AdapterFolderErrorsNameWhatIsWrong) {
  CausalLM model = load("llama_gqa");
  EXPECT_NE(error_of([&] { load_adapter(model, "/nonexistent/adapter"); }).find("does not exist"),
            std::string::npos);

  const LoraConfig config = config_of(R"({"target_modules": ["q_proj"]})");
  attach_lora(model, config, 1);
  const fs::path dir = temp_dir("errors");
  save_adapter(model, config, dir.string());
  auto tensors = lora_tensors(model);

  // Another model's shapes: qwen3's q_proj is wider.
  CausalLM qwen3 = load("qwen3_head_dim_sliding");
  EXPECT_NE(error_of([&] { load_adapter(qwen3, dir.string()); }).find("has shape"), std::string::npos);

  // PEFT's in-memory names load too; a missing key and an extra one are errors naming them.
  const std::string file = (dir / "adapter_model.safetensors").string();
  std::vector<std::pair<std::string, Tensor>> renamed;
  for (const auto& [name, t] : tensors)
    renamed.emplace_back(name.substr(0, name.size() - 6) + "default.weight", t);
  save_safetensors(file, renamed);
  EXPECT_EQ(error_of([&] {
              CausalLM m = load("llama_gqa");
              load_adapter(m, dir.string());
            }),
            "(no error)");

  save_safetensors(file, std::vector(tensors.begin() + 1, tensors.end()));
  EXPECT_NE(error_of([&] {
              CausalLM m = load("llama_gqa");
              load_adapter(m, dir.string());
            }).find("has no " + tensors[0].first),
            std::string::npos);
  tensors.emplace_back("base_model.model.model.layers.0.mlp.up_proj.lora_A.weight", tensors[0].second);
  save_safetensors(file, tensors);
  EXPECT_NE(error_of([&] {
              CausalLM m = load("llama_gqa");
              load_adapter(m, dir.string());
            }).find("up_proj.lora_A"),
            std::string::npos);
  EXPECT_NE(error_of([&] { attach_lora(model, config, 2); }).find("already has LoRA adapters"),
            std::string::npos);
  fs::remove_all(dir);
}

// Writes tests/fixtures/lora/tfm_llama_gqa, the adapter tfm saved that make_lora_references.py loads into
// PEFT (run with --gtest_also_run_disabled_tests after a change to the saved format).
TEST(Lora, DISABLED_WriteTheTfmAdapterFixture) {
  CausalLM model = load("llama_gqa");
  LoraConfig config = config_of(R"({"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "k_proj", "v_proj",
      "o_proj", "gate_proj", "up_proj", "down_proj"]})");
  config.base_model_name_or_path = "llama_gqa";
  attach_lora(model, config, 2026);
  randomize_b(model, 2027);
  save_adapter(model, config, kLoraFixtures + "tfm_llama_gqa");
}

// PEFT's logits for the adapters under tests/fixtures/lora/: one PEFT saved (peft_<model>) and one tfm saved
// (tfm_<model>), each with peft_logits.json from tests/fixtures/make_lora_references.py.
TEST(Lora, LogitsMatchPefts) {
  int compared = 0;
  for (const std::string adapter : {"peft_llama_gqa", "tfm_llama_gqa", "peft_qwen3_head_dim_sliding"}) {
    const fs::path dir = kLoraFixtures + adapter;
    if (!fs::exists(dir / "peft_logits.json")) continue;
    const json::Value ref = json::parse_file((dir / "peft_logits.json").string());
    CausalLM model = load(ref.at("model").as_string());
    load_adapter(model, dir.string());
    std::vector<int64_t> ids;
    for (const json::Value& id : ref.at("input_ids").as_array()) ids.push_back(id.as_int());
    const Tensor logits = logits_of(model, ids);
    std::vector<float> want;
    for (const json::Value& row : ref.at("logits").as_array())
      for (const json::Value& v : row.as_array()) want.push_back(static_cast<float>(v.as_double()));
    ASSERT_EQ(static_cast<int64_t>(want.size()), logits.numel()) << adapter;
    EXPECT_LT(parity::relative_error(logits.data<float>(), want), 1e-5) << adapter;
    ++compared;
  }
  if (compared == 0)
    GTEST_SKIP()
        << "no PEFT references yet: run tests/fixtures/make_lora_references.py where torch and peft are";
}

}  // namespace
}  // namespace tfm

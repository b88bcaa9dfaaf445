// Training on the fixture models against Transformers (tests/fixtures/make_training_references.py made the
// references with torch on the CPU in float32): one batch's loss and every parameter's gradient, and a 100-step
// Trainer run's logged losses, gradient norms and learning rates; then what tfm's Trainer promises itself
// (activation checkpointing changes nothing, resume continues the run exactly, checkpoints rotate, the final
// folder loads).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "../model/parity_fixtures.h"
#include "../xpu/test_platform.h"
#include "support/scratch_dir.h"
#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/layers.h"
#include "tfm/model/step_inputs.h"
#include "tfm/train/checkpoint_folder.h"
#include "tfm/train/trainer.h"

namespace tfm {
namespace {

const std::string kReferences = std::string(TFM_SOURCE_DIR) + "/tests/fixtures/train/";

CausalLM load_float32(const std::string& name) {
  LoadOptions options;
  options.dtype = "float32";
  options.progress = false;
  return CausalLM::from_pretrained(parity::kFixtures + name, options);
}

std::vector<TrainingExample> examples_of(const json::Value& list) {
  std::vector<TrainingExample> out;
  for (const json::Value& e : list.as_array()) {
    TrainingExample ex;
    for (const json::Value& v : e.at("input_ids").as_array()) ex.input_ids.push_back(static_cast<int32_t>(v.as_int()));
    for (const json::Value& v : e.at("labels").as_array()) ex.labels.push_back(static_cast<int32_t>(v.as_int()));
    out.push_back(std::move(ex));
  }
  return out;
}

std::vector<const TrainingExample*> pointers(const std::vector<TrainingExample>& examples) {
  std::vector<const TrainingExample*> out;
  for (const TrainingExample& e : examples) out.push_back(&e);
  return out;
}

// A zeroed float32 gradient for every parameter (the tied head's named too).
Gradients gradients_for(const CausalLM& model) {
  Gradients grads;
  for (const Parameter& p : model.parameters()) {
    const Tensor g = Tensor::cpu(p.value.shape(), DType::float32);
    grads.add(p.name, g);
    if (p.name == "model.embed_tokens.weight" && model.config().tie_word_embeddings) grads.add("lm_head.weight", g);
  }
  return grads;
}

// max |got - want| within `tol` of max |want|.
void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, std::fabs(double{got.data<float>()[i]} - want.data<float>()[i]));
    scale = std::max(scale, std::fabs(double{want.data<float>()[i]}));
  }
  EXPECT_LE(diff, tol * scale) << what << ": max error " << diff << " at scale " << scale;
}

class GradientParity : public ::testing::TestWithParam<std::string> {};

TEST_P(GradientParity, LossAndEveryGradientMatchTransformers) {
  const std::string name = GetParam();
  const json::Value ref = json::parse_file(kReferences + "gradients/" + name + ".json");
  const SafetensorsFile want = SafetensorsFile::open(kReferences + "gradients/" + name + ".safetensors");
  CausalLM model = load_float32(name);
  const std::vector<TrainingExample> batch = examples_of(ref.at("sequences"));
  const int64_t items = ref.at("items").as_int();
  Gradients grads = gradients_for(model);
  const StepLoss loss = model.forward_backward(pointers(batch), 1.f / static_cast<float>(items), grads);
  EXPECT_EQ(loss.items, items);
  EXPECT_NEAR(loss.loss_sum, ref.at("loss_sum").as_double(), 1e-5 * ref.at("loss_sum").as_double());
  size_t compared = 0;
  for (const Parameter& p : model.parameters()) {
    for (const auto& [checkpoint_name, grad] : p.checkpoint_tensors(grads.of(p.name))) {
      ASSERT_NE(want.find(checkpoint_name), nullptr) << checkpoint_name << " has no reference gradient";
      expect_close(grad, want.get(checkpoint_name), 1e-4, name + " " + checkpoint_name);
      ++compared;
    }
  }
  EXPECT_EQ(compared, want.tensors().size()) << "every reference gradient is compared";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GradientParity,
                         ::testing::Values("llama_gqa", "llama3_rope_bias", "mistral_sliding", "qwen2_tied_sharded",
                                         "qwen3_head_dim_sliding"));

TEST(Training, RecomputedLayersGiveTheSameGradients) {
  const json::Value ref = json::parse_file(kReferences + "gradients/qwen3_head_dim_sliding.json");
  CausalLM model = load_float32("qwen3_head_dim_sliding");
  const std::vector<TrainingExample> batch = examples_of(ref.at("sequences"));
  Gradients kept = gradients_for(model), recomputed = gradients_for(model);
  const StepLoss a = model.forward_backward(pointers(batch), 0.1f, kept);
  const StepLoss b = model.forward_backward(pointers(batch), 0.1f, recomputed, /*recompute_layers=*/true);
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  for (size_t i = 0; i < kept.all().size(); ++i)
    expect_close(recomputed.all()[i].second, kept.all()[i].second, 1e-6, kept.all()[i].first);
}

// A step whose first sequence fills whole cache blocks has its rows' slots in order, so the layers write keys
// and values into the caches themselves (no kv_cache_write); the same sequences in the other order do not.
// Either way the loss and the gradients are the same.
TEST(Training, KeysAndValuesWrittenInTheCacheGiveTheSameGradients) {
  const json::Value ref = json::parse_file(kReferences + "gradients/qwen3_head_dim_sliding.json");
  CausalLM model = load_float32("qwen3_head_dim_sliding");
  const std::vector<TrainingExample> fixture = examples_of(ref.at("sequences"));
  TrainingExample whole = fixture[0];  // 9 + 7 tokens: one block of 16
  whole.input_ids.insert(whole.input_ids.end(), fixture[1].input_ids.begin(), fixture[1].input_ids.end());
  whole.labels.insert(whole.labels.end(), fixture[1].labels.begin(), fixture[1].labels.end());
  ASSERT_EQ(whole.input_ids.size(), static_cast<size_t>(CausalLM::kDefaultBlockSize));
  Gradients in_place = gradients_for(model), written = gradients_for(model);
  const StepLoss a = model.forward_backward({&whole, &fixture[1]}, 0.1f, in_place);
  const StepLoss b = model.forward_backward({&fixture[1], &whole}, 0.1f, written);
  EXPECT_NEAR(a.loss_sum, b.loss_sum, 1e-6 * std::fabs(b.loss_sum));
  for (size_t i = 0; i < written.all().size(); ++i)
    expect_close(in_place.all()[i].second, written.all()[i].second, 1e-5, written.all()[i].first);
}

TEST(Training, StepInputsSayWhetherTheSlotsAreInOrder) {
  ForwardBatch batch;
  batch.slots = {0, 1, 2, 3};
  EXPECT_TRUE(allocate_step_inputs(batch, Device{}).meta.slots_in_order);
  batch.slots = {0, 1, 3, 4};  // a sequence's padding before the next
  EXPECT_FALSE(allocate_step_inputs(batch, Device{}).meta.slots_in_order);
}

// A label outside the vocabulary is an error naming it, on every device, before any kernel reads its logit.
TEST(Training, ALabelOutsideTheVocabularyIsAnError) {
  std::vector<std::string> devices = {"cpu"};
  if (xpu::seam_test_device()) devices.push_back("xpu:0");
  if (Backend* cuda = find_backend(DeviceType::cuda); cuda && cuda->device_count() > 0) devices.push_back("cuda:0");
  for (const std::string& device : devices) {
    LoadOptions options;
    options.device = device;
    options.progress = false;
    CausalLM model = CausalLM::from_pretrained(parity::kFixtures + "llama_gqa", options);
    Gradients grads = gradients_for(model);
    const int32_t vocab = static_cast<int32_t>(model.config().vocab_size);
    for (const int32_t bad : {vocab, -1, -99}) {
      const TrainingExample example{{1, 2, 3, 4}, {1, 2, bad, 4}};
      try {
        model.forward_backward({&example}, 1.f, grads);
        ADD_FAILURE() << device << ": label " << bad << " was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("a training label is " + std::to_string(bad)), std::string::npos)
            << e.what();
      }
    }
  }
}

// The arguments of the reference run, with logs of every step and the output folder given.
TrainingArguments reference_arguments(const json::Value& curve, const std::string& output_dir) {
  json::Object args = curve.at("arguments").as_object();
  args.emplace_back("output_dir", output_dir);
  args.emplace_back("use_cpu", true);
  return TrainingArguments::from_json(json::Value(args));
}

TEST(Trainer, LossCurveMatchesTransformersTrainer) {
  const json::Value curve = json::parse_file(kReferences + "trainer_curve.json");
  testing::ScratchDir dir;
  CausalLM model = load_float32(curve.at("model").as_string());
  Trainer trainer(model, reference_arguments(curve, dir / "out"), full_model_weights(model, parity::kFixtures + curve.at("model").as_string()),
                  examples_of(curve.at("examples")));
  trainer.train();
  const auto& want = curve.at("log_history").as_array();
  const auto& got = trainer.state().log_history;
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i + 1 < want.size(); ++i) {  // the last entry is the summary
    const json::Value g(got[i]);
    const std::string at = "step " + std::to_string(i + 1);
    EXPECT_EQ(g.at("step").as_int(), want[i].at("step").as_int()) << at;
    EXPECT_NEAR(g.at("epoch").as_double(), want[i].at("epoch").as_double(), 1e-9) << at;
    EXPECT_NEAR(g.at("learning_rate").as_double(), want[i].at("learning_rate").as_double(),
                1e-9 * curve.at("arguments").at("learning_rate").as_double())
        << at;
    EXPECT_NEAR(g.at("loss").as_double(), want[i].at("loss").as_double(), 1e-3) << at;
    EXPECT_NEAR(g.at("grad_norm").as_double(), want[i].at("grad_norm").as_double(),
                1e-3 * std::max(1.0, want[i].at("grad_norm").as_double()))
        << at;
  }
}

// A short run of the reference's data with its checkpoints every 5 steps.
TrainingArguments short_run(const std::string& output_dir) {
  const json::Value curve = json::parse_file(kReferences + "trainer_curve.json");
  TrainingArguments args = reference_arguments(curve, output_dir);
  args.max_steps = 20;
  args.save_strategy = IntervalStrategy::steps;
  args.save_steps = 5;
  args.save_total_limit = 2;
  return args;
}

std::vector<TrainingExample> reference_examples() {
  return examples_of(json::parse_file(kReferences + "trainer_curve.json").at("examples"));
}

TEST(Trainer, ResumeContinuesTheRunExactly) {
  testing::ScratchDir dir;
  const std::string fixture = parity::kFixtures + "qwen3_head_dim_sliding";
  CausalLM whole_model = load_float32("qwen3_head_dim_sliding");
  Trainer whole(whole_model, short_run(dir / "whole"), full_model_weights(whole_model, fixture), reference_examples());
  whole.train();
  // Checkpoints rotate: two remain, the newest ones, each complete.
  EXPECT_EQ(sorted_checkpoints(dir / "whole"),
            (std::vector<std::string>{dir / "whole/checkpoint-15", dir / "whole/checkpoint-20"}));
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "trainer_state.json", "training_args.json",
                           "config.json"})
    EXPECT_TRUE(std::filesystem::exists(dir / ("whole/checkpoint-15/" + std::string(file)))) << file;

  TrainingArguments resumed_args = short_run(dir / "resumed");
  resumed_args.resume_from_checkpoint = dir / "whole/checkpoint-15";
  CausalLM resumed_model = load_float32("qwen3_head_dim_sliding");
  Trainer resumed(resumed_model, resumed_args, full_model_weights(resumed_model, fixture), reference_examples());
  resumed.train();
  const auto& a = whole.state().log_history;
  const auto& b = resumed.state().log_history;
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 15; i + 1 < a.size(); ++i) {
    EXPECT_EQ(json::Value(a[i]).at("loss").as_double(), json::Value(b[i]).at("loss").as_double()) << "step " << i + 1;
    EXPECT_EQ(json::Value(a[i]).at("grad_norm").as_double(), json::Value(b[i]).at("grad_norm").as_double());
  }
  // The final folders hold the same weights, and the model loads from them.
  const SafetensorsFile x = SafetensorsFile::open(dir / "whole/model.safetensors");
  const SafetensorsFile y = SafetensorsFile::open(dir / "resumed/model.safetensors");
  for (const TensorInfo& t : x.tensors()) {
    const Tensor tx = x.get(t.name), ty = y.get(t.name);
    ASSERT_EQ(std::memcmp(tx.raw(), ty.raw(), tx.nbytes()), 0) << t.name;
  }
  CausalLM reloaded = load_float32("qwen3_head_dim_sliding");
  LoadOptions options;
  options.progress = false;
  CausalLM trained = CausalLM::from_pretrained(dir / "whole", options);
  EXPECT_EQ(trained.dtype(), DType::float32);
  const Tensor saved_embedding = x.get("model.embed_tokens.weight");
  const Tensor loaded_embedding = to_device(trained.parameters().front().value, Device{});
  ASSERT_EQ(std::memcmp(saved_embedding.raw(), loaded_embedding.raw(), saved_embedding.nbytes()), 0);
}

TEST(Trainer, EvaluationIsTheMeanLossPerLabel) {
  testing::ScratchDir dir;
  CausalLM model = load_float32("qwen3_head_dim_sliding");
  std::vector<TrainingExample> eval = reference_examples();
  eval.resize(6);
  TrainingArguments args = short_run(dir / "out");
  args.per_device_eval_batch_size = 4;
  Trainer trainer(model, args, full_model_weights(model, parity::kFixtures + "qwen3_head_dim_sliding"),
                  reference_examples(), eval);
  const LogEntry metrics = trainer.evaluate();
  // Batches of 4 and 2: each batch's mean, weighted by its examples.
  double want = 0;
  for (const auto& [begin, size] : {std::pair<size_t, size_t>{0, 4}, {4, 2}}) {
    std::vector<const TrainingExample*> batch;
    for (size_t i = begin; i < begin + size; ++i) batch.push_back(&eval[i]);
    const StepLoss l = model.loss(batch);
    want += l.loss_sum / static_cast<double>(l.items) * static_cast<double>(size);
  }
  EXPECT_NEAR(json::Value(metrics).at("eval_loss").as_double(), want / 6, 1e-9);
}

// On the cpu a model in its file's dtype views the file's mapping, and training writes its weights: the
// writes stay in the process (copy-on-write pages), and the file keeps its bytes.
TEST(Trainer, TrainsAModelViewingItsFileWithoutWritingTheFile) {
  testing::ScratchDir dir;
  const std::string fixture = parity::kFixtures + "qwen3_head_dim_sliding";
  CausalLM first = load_float32("qwen3_head_dim_sliding");
  TrainingArguments args = short_run(dir / "float32");
  args.max_steps = 2;  // the first step's learning rate is 0 (warm-up)
  args.save_strategy = IntervalStrategy::no;
  Trainer(first, args, full_model_weights(first, fixture), reference_examples()).train();
  const std::string file = dir / "float32/model.safetensors";
  std::ifstream in(file, std::ios::binary);
  const std::string before{std::istreambuf_iterator<char>(in), {}};

  LoadOptions options;
  options.progress = false;
  CausalLM viewing = CausalLM::from_pretrained(dir / "float32", options);
  ASSERT_EQ(viewing.dtype(), DType::float32);
  args.output_dir = dir / "again";
  Trainer(viewing, args, full_model_weights(viewing, dir / "float32"), reference_examples()).train();
  const SafetensorsFile saved = SafetensorsFile::open(file);
  const Tensor stored = saved.get("model.embed_tokens.weight");
  const Tensor trained = viewing.parameters().front().value;
  EXPECT_NE(std::memcmp(stored.raw(), trained.raw(), stored.nbytes()), 0);  // the step changed the weights
  std::ifstream after_in(file, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(after_in), {}), before);
}

}  // namespace
}  // namespace tfm

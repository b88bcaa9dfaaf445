// Asynchronous batching: the engine plans and queues each step before it reads the tokens of the step the
// device is running. Every request must get exactly what it gets with steps run one after another (greedy and
// seeded sampling alike), on the cpu and on xpu, whatever finishes at which step, stops on a string, is
// cancelled, arrives while steps are in flight or needs its tokens on the host; and no token may follow a
// request's last output.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <string>

#include "../model/parity_fixtures.h"
#include "../xpu/test_platform.h"
#include "support/error_of.h"
#include "support/model_copy.h"
#include "tfm/backend/backend.h"
#include "tfm/engine/engine.h"
#include "tfm/generate/generate.h"

namespace tfm {
namespace {

using parity::kFixtures;

// What one request received, output by output.
struct Received {
  std::vector<int64_t> tokens;
  StopReason stop = StopReason::none;
  bool finished = false;
  bool cancelled = false;
};

RequestOptions options(json::Object generation) {
  RequestOptions o;
  o.generation = std::move(generation);
  return o;
}

// Each token as "[id]", so that a stop string names one token.
std::string bracketed(const std::vector<int64_t>& ids) {
  std::string text;
  for (int64_t id : ids) text += "[" + std::to_string(id) + "]";
  return text;
}

// A fixed script of requests, by name: some at the start, some added once "long" has 4 tokens (steps are in
// flight then), "cancelled" cancelled once it has 2. Greedy ones finish at different steps (max_new_tokens, an
// EOS id, a stop string); sampled ones share a seed; "penalized" (penalties are counted on the host) and
// "logprobs" (host logits) make steps run one after another while they last. The budget chunks prompts and
// the cache is small enough that requests are preempted.
std::map<std::string, Received> run_script(CausalLM& model, bool async, EngineStats* stats = nullptr) {
  const auto prompts = parity::reference("llama_gqa");
  const GenerationConfig gc = load_generation_config(kFixtures + "llama_gqa", model.config());
  Engine engine(model, gc,
                {.scheduler = {.max_batch_tokens = 24, .max_num_seqs = 8, .max_prefill_chunk = 8},
                 .block_size = 4,
                 .num_blocks = 14,
                 .async_batching = async},
                bracketed);
  EXPECT_EQ(engine.async_batching(), async);
  const json::Object greedy = {{"do_sample", false}};
  auto with = [](json::Object o, json::Object more) {
    o.insert(o.end(), more.begin(), more.end());
    return o;
  };
  const json::Object sampled = {{"do_sample", true}, {"temperature", 0.8}, {"top_k", 40}, {"top_p", 0.9},
                                {"seed", 7}};
  std::map<RequestId, std::string> names;
  auto add = [&](const std::string& name, const std::vector<int64_t>& prompt, json::Object generation) {
    names[engine.add_request(prompt, options(std::move(generation)))] = name;
  };
  add("one token", prompts[0].ids, with(greedy, {{"max_new_tokens", 1}}));
  add("short", prompts[1].ids, with(greedy, {{"max_new_tokens", 5}}));
  add("long", prompts[2].ids, with(greedy, {{"max_new_tokens", 18}}));
  add("eos", prompts[1].ids, with(greedy, {{"max_new_tokens", 30}, {"eos_token_id", prompts[1].generated[5]}}));
  add("stop string", prompts[0].ids,
      with(greedy, {{"max_new_tokens", 30}, {"stop_strings", bracketed({prompts[0].generated[4]})}}));
  add("cancelled", prompts[2].ids, with(greedy, {{"max_new_tokens", 30}}));
  add("sampled", prompts[0].ids, with(sampled, {{"max_new_tokens", 14}}));
  add("sampled too", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, with(sampled, {{"max_new_tokens", 9}}));

  std::map<std::string, Received> got;
  bool late_added = false;
  int steps = 0;
  while (engine.has_unfinished()) {
    const std::vector<RequestOutput> outputs = engine.step();
    if (++steps == 1 && async) {
      EXPECT_TRUE(outputs.empty()) << "the first step only queues";
    }
    for (const RequestOutput& o : outputs) {
      Received& r = got[names.at(o.id)];
      EXPECT_FALSE(r.finished || r.cancelled) << names.at(o.id) << " got a token after its end";
      r.tokens.insert(r.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      r.finished = o.finished;
      r.stop = o.stop;
    }
    if (Received& c = got["cancelled"]; !c.cancelled && c.tokens.size() >= 2) {
      for (const auto& [id, name] : names)
        if (name == "cancelled") engine.cancel(id);
      c.cancelled = true;
    }
    if (!late_added && got["long"].tokens.size() >= 4) {
      late_added = true;
      add("late", prompts[2].ids, with(greedy, {{"max_new_tokens", 7}}));  // a prefix hit on "long"'s blocks
      add("late sampled", prompts[1].ids, with(sampled, {{"max_new_tokens", 8}}));
      add("penalized", prompts[0].ids, with(sampled, {{"max_new_tokens", 4}, {"repetition_penalty", 1.3}}));
      RequestOptions logprobs = options(with(greedy, {{"max_new_tokens", 3}}));
      logprobs.sampling.top_logprobs = 2;
      names[engine.add_request(prompts[1].ids, logprobs)] = "logprobs";
    }
  }
  EXPECT_EQ(engine.stats().blocks_used, 0);
  if (stats) *stats = engine.stats();
  return got;
}

// On the device the parameter names: cpu, xpu:0 of the OpenCL test platform, or cuda:0 where there is one.
class OnDevice : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    device_ = GetParam();
    if (device_ == "xpu") {
      if (!xpu::seam_test_device()) GTEST_SKIP() << "no OpenCL device on platform '" << xpu::test_platform() << "'";
      device_ = "xpu:0";
    } else if (device_ == "cuda") {
      Backend* cuda = find_backend(DeviceType::cuda);
      if (!cuda || cuda->device_count() == 0) GTEST_SKIP() << "no CUDA device here";
      device_ = "cuda:0";
    }
  }
  std::string device_;
};

TEST_P(OnDevice, AsyncBatchingGivesEveryRequestWhatStepsOneAfterAnotherGive) {
  CausalLM model =
      CausalLM::from_pretrained(kFixtures + "llama_gqa", {.dtype = "float32", .device = device_, .progress = false});
  const std::map<std::string, Received> want = run_script(model, false);
  EngineStats stats;
  const std::map<std::string, Received> got = run_script(model, true, &stats);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    const Received& g = got.at(name);
    EXPECT_EQ(g.tokens, w.tokens) << name;
    EXPECT_EQ(g.stop, w.stop) << name;
  }
  // The script reaches what it is for.
  EXPECT_EQ(want.at("one token").tokens.size(), 1u);
  EXPECT_EQ(want.at("long").tokens.size(), 18u);
  EXPECT_EQ(want.at("eos").stop, StopReason::eos) << testing::PrintToString(want.at("eos").tokens);
  EXPECT_EQ(want.at("stop string").stop, StopReason::stop_string);
  EXPECT_EQ(want.at("cancelled").tokens.size(), 2u);
  EXPECT_GT(stats.preemptions, 0);
  EXPECT_GT(stats.prefix_hits, 0);
}


// A token chosen from logits that are not finite (-1) reaches the step queued behind its own before the host
// reads it: that step runs all the same (the embedding leaves the row unwritten), and the error is the one
// steps one after another give. (On the cpu only: in the file's dtype the weights are a view of the file, which
// no load checks; the embedding's negative ids on xpu are the conformance test's.)
TEST(AsyncBatching, ReportsNonFiniteLogitsAsStepsOneAfterAnotherDo) {
  test_support::ModelCopy copy(kFixtures + "llama_gqa");
  copy.set_first_element("model.norm.weight", std::numeric_limits<float>::quiet_NaN());
  CausalLM model = CausalLM::from_pretrained(copy.dir(), {.dtype = "bfloat16", .device = "cpu", .progress = false});
  const GenerationConfig gc = load_generation_config(kFixtures + "llama_gqa", model.config());
  for (bool async : {false, true}) {
    Engine engine(model, gc, {.num_blocks = 8, .async_batching = async});
    RequestOptions o = options({{"max_new_tokens", 4}, {"do_sample", false}});
    o.name = "prompt 0";
    engine.add_request({1, 2, 3}, o);
    EXPECT_EQ(test_support::error_of([&] {
                while (engine.has_unfinished()) engine.step();
              }),
              "the logits of prompt 0 at generation step 1 hold NaN or infinite values: the model's weights hold "
              "such values or its computation overflows in bfloat16 (remove_invalid_values=True replaces them, "
              "as in Transformers)")
        << "async " << async;
  }
}

INSTANTIATE_TEST_SUITE_P(AsyncBatching, OnDevice, testing::Values("cpu", "xpu", "cuda"));

TEST(AsyncBatching, IsOnForDevicesApartFromTheHostAndCanBeForced) {
  CausalLM model = CausalLM::from_pretrained(kFixtures + "llama_gqa", {.progress = false});
  const GenerationConfig gc = load_generation_config(kFixtures + "llama_gqa", model.config());
  EXPECT_FALSE(Engine(model, gc, {.num_blocks = 8}).async_batching());
  EXPECT_TRUE(Engine(model, gc, {.num_blocks = 8, .async_batching = true}).async_batching());
  if (xpu::seam_test_device()) {
    CausalLM on_xpu = CausalLM::from_pretrained(kFixtures + "llama_gqa", {.device = "xpu:0", .progress = false});
    EXPECT_TRUE(Engine(on_xpu, gc, {.num_blocks = 8}).async_batching());
    EXPECT_FALSE(Engine(on_xpu, gc, {.num_blocks = 8, .async_batching = false}).async_batching());
  }
}

}  // namespace
}  // namespace tfm

// The engine with a real model: what it generates for each request is what that request gives alone (and what
// Transformers gives), however requests share steps, get chunked, hit the prefix cache or are preempted.
#include <gtest/gtest.h>

#include <map>
#include <atomic>
#include <condition_variable>
#include <random>
#include <thread>

#include "../model/parity_fixtures.h"
#include "../xpu/test_platform.h"
#include "support/error_of.h"
#include "tfm/core/error.h"
#include "tfm/engine/async_engine.h"
#include "tfm/engine/engine.h"
#include "tfm/generate/generate.h"

namespace tfm {
namespace {

using parity::kFixtures;

CausalLM load(const std::string& name, const std::string& dtype = "float32") {
  return CausalLM::from_pretrained(kFixtures + name, {.dtype = dtype, .progress = false});
}

GenerationConfig generation_config(const CausalLM& model, const std::string& name) {
  return load_generation_config(kFixtures + name, model.config());
}

// Runs every request to the end; returns each one's generated tokens by id.
std::map<RequestId, std::vector<int64_t>> run(Engine& engine) {
  std::map<RequestId, std::vector<int64_t>> out;
  while (engine.has_unfinished()) {
    for (const RequestOutput& o : engine.step()) {
      auto& tokens = out[o.id];
      tokens.insert(tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
    }
  }
  return out;
}

RequestOptions greedy(int64_t max_new_tokens) {
  RequestOptions o;
  o.generation = {{"max_new_tokens", max_new_tokens}, {"do_sample", false}};
  return o;
}

TEST(Engine, GeneratesWhatTransformersGenerates) {
  for (const std::string name : {"llama_gqa", "qwen3_head_dim_sliding", "mistral_sliding"}) {
    CausalLM model = load(name);
    Engine engine(model, generation_config(model, name), {.num_blocks = 64});
    std::vector<RequestId> ids;
    const auto prompts = parity::reference(name);
    for (const auto& p : prompts) ids.push_back(engine.add_request(p.ids, greedy(24)));
    const auto out = run(engine);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(out.at(ids[i]), prompts[i].generated) << name << " " << i;
    EXPECT_EQ(engine.stats().blocks_used, 0);
  }
}

// 24 requests through a small budget and a small cache: prompts are chunked, steps mix prompts with decodes,
// later requests share a prefix, and the cache runs out so requests are preempted and computed again. Each
// request's tokens equal the same request run alone.
TEST(Engine, EveryRequestGetsWhatItGetsAlone) {
  CausalLM model = load("llama_gqa");
  const GenerationConfig gc = generation_config(model, "llama_gqa");
  std::mt19937 rng(5);
  std::vector<std::vector<int64_t>> prompts;
  std::vector<int64_t> lengths;
  const std::vector<int64_t> system = {1, 7, 9, 11, 13, 17, 19, 23, 29, 31, 37};
  for (int i = 0; i < 24; ++i) {
    std::vector<int64_t> p = i % 2 ? system : std::vector<int64_t>{1};
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int j = 0; j < n; ++j) p.push_back(3 + static_cast<int64_t>(rng() % 300));
    prompts.push_back(p);
    lengths.push_back(4 + static_cast<int64_t>(rng() % 20));
  }
  std::vector<std::vector<int64_t>> alone;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Engine single(model, gc, {.num_blocks = 32});
    const RequestId id = single.add_request(prompts[i], greedy(lengths[i]));
    alone.push_back(run(single).at(id));
  }
  Engine shared(model, gc,
                {.scheduler = {.max_batch_tokens = 40, .max_num_seqs = 10, .max_prefill_chunk = 16}, .block_size = 4,
                 .num_blocks = 40});
  std::vector<RequestId> ids;
  std::map<RequestId, std::vector<int64_t>> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back(shared.add_request(prompts[i], greedy(lengths[i])));
    if (i % 3 == 2) {  // requests arrive while others run
      for (const RequestOutput& o : shared.step()) out[o.id].insert(out[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());
    }
  }
  for (const auto& [id, tokens] : run(shared)) out[id].insert(out[id].end(), tokens.begin(), tokens.end());
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(out.at(ids[i]), alone[i]) << "request " << i;
  const EngineStats st = shared.stats();
  EXPECT_GT(st.prefix_hits, 0);
  EXPECT_GT(st.preemptions, 0);
  EXPECT_EQ(st.blocks_used, 0);
}

TEST(Engine, SeededSamplingDoesNotDependOnTheOtherRequests) {
  CausalLM model = load("qwen3_head_dim_sliding");
  const GenerationConfig gc = generation_config(model, "qwen3_head_dim_sliding");
  RequestOptions sampled;
  sampled.generation = {{"max_new_tokens", 16}, {"do_sample", true}, {"temperature", 0.9}, {"top_p", 0.9},
                        {"seed", 1234}};
  const std::vector<int64_t> prompt = {1, 5, 9, 14};
  Engine alone(model, gc, {.num_blocks = 32});
  const RequestId a = alone.add_request(prompt, sampled);
  const auto want = run(alone).at(a);
  Engine busy(model, gc, {.num_blocks = 64});
  busy.add_request({1, 2, 3}, greedy(10));
  const RequestId b = busy.add_request(prompt, sampled);
  busy.add_request({7, 8, 9, 10, 11}, sampled);
  EXPECT_EQ(run(busy).at(b), want);
}

// A sampled request whose processors the device runs (op::SampleRows) draws the tokens the host draws from the
// logits (with log probabilities asked for, the host chooses), and the same tokens on every device.
TEST(Engine, SeededSamplingDrawsTheSameTokensOnTheDeviceAndTheHostAndOnEveryDevice) {
  RequestOptions sampled;
  sampled.generation = {{"max_new_tokens", 24}, {"do_sample", true}, {"temperature", 0.8},     {"top_k", 12},
                        {"top_p", 0.9},          {"min_p", 0.02},      {"repetition_penalty", 1.3}, {"seed", 77}};
  sampled.sampling.presence_penalty = 0.4;
  sampled.sampling.frequency_penalty = 0.2;
  const std::vector<int64_t> prompt = {1, 5, 9, 14, 5};
  auto generate_on = [&](const std::string& device, const RequestOptions& options) {
    CausalLM model = CausalLM::from_pretrained(kFixtures + "qwen3_head_dim_sliding", {.device = device, .progress = false});
    Engine engine(model, generation_config(model, "qwen3_head_dim_sliding"), {.num_blocks = 32});
    const RequestId id = engine.add_request(prompt, options);
    return run(engine).at(id);
  };
  const std::vector<int64_t> on_cpu = generate_on("cpu", sampled);
  RequestOptions on_host = sampled;
  on_host.sampling.top_logprobs = 0;
  EXPECT_EQ(generate_on("cpu", on_host), on_cpu);
  if (xpu::seam_test_device()) {
    EXPECT_EQ(generate_on("xpu:0", sampled), on_cpu);
  }
  if (Backend* cuda = find_backend(DeviceType::cuda); cuda && cuda->device_count() > 0) {
    EXPECT_EQ(generate_on("cuda:0", sampled), on_cpu);
  }
}

// min_new_tokens and min_length keep EOS away on the device (a penalty of +inf in op::SampleRows) as their
// processors do on the host: EOS is the token greedy search picks second, so suppressing it changes the text.
TEST(Engine, MinimumLengthsSuppressEOSOnTheDeviceAsOnTheHost) {
  const std::vector<int64_t> prompt = {1, 5, 9, 14, 5};
  std::vector<std::string> devices = {"cpu"};
  if (xpu::seam_test_device()) devices.push_back("xpu:0");
  if (Backend* cuda = find_backend(DeviceType::cuda); cuda && cuda->device_count() > 0) devices.push_back("cuda:0");
  for (const std::string& device : devices) {
    CausalLM model =
        CausalLM::from_pretrained(kFixtures + "qwen3_head_dim_sliding", {.device = device, .progress = false});
    const GenerationConfig gc = generation_config(model, "qwen3_head_dim_sliding");
    auto generate = [&](const RequestOptions& options) {
      Engine engine(model, gc, {.num_blocks = 32});
      const RequestId id = engine.add_request(prompt, options);
      return run(engine).at(id);
    };
    const std::vector<int64_t> free = generate(greedy(8));
    ASSERT_EQ(free.size(), 8u) << device;
    const int64_t eos = free[1];
    for (const auto& [name, value] : {std::pair{"min_new_tokens", int64_t{5}}, {"min_length", int64_t{10}}}) {
      for (const bool sample : {false, true}) {
        RequestOptions on_device;
        on_device.generation = {{"max_new_tokens", 8}, {"eos_token_id", eos}, {name, value}, {"do_sample", sample}};
        if (sample) on_device.generation.insert(on_device.generation.end(), {{"temperature", 0.7}, {"seed", 11}});
        RequestOptions on_host = on_device;
        on_host.sampling.top_logprobs = 0;
        // Chosen on the device, the request lets the engine queue a step ahead: the first step returns nothing.
        Engine ahead(model, gc, {.num_blocks = 32, .async_batching = true});
        ahead.add_request(prompt, on_device);
        EXPECT_TRUE(ahead.step().empty()) << device << " " << name;
        const std::vector<int64_t> tokens = generate(on_device);
        EXPECT_EQ(tokens, generate(on_host)) << device << " " << name << (sample ? " sampled" : " greedy");
        ASSERT_GE(tokens.size(), 5u) << device << " " << name;
        EXPECT_EQ(std::count(tokens.begin(), tokens.begin() + 5, eos), 0) << device << " " << name;
        if (!sample) {
          EXPECT_NE(tokens[1], free[1]) << device << " " << name;
        }
      }
    }
  }
}

// A request with log probabilities needs its logits on the host; the greedy and sampled requests sharing its
// steps are still chosen on the device (CausalLM::split_step), each getting what it gets alone.
TEST(Engine, ARequestThatNeedsItsLogitsOnTheHostLeavesTheOthersTheirTokens) {
  RequestOptions sampled;
  sampled.generation = {{"max_new_tokens", 12}, {"do_sample", true}, {"temperature", 0.8}, {"top_k", 20},
                        {"repetition_penalty", 1.2}, {"seed", 3}};
  sampled.sampling.presence_penalty = 0.3;
  RequestOptions with_logprobs = greedy(9);
  with_logprobs.sampling.top_logprobs = 2;
  const std::vector<std::pair<std::vector<int64_t>, RequestOptions>> requests = {
      {{1, 5, 9}, greedy(10)}, {{1, 17, 42, 8}, with_logprobs}, {{1, 5, 9, 14, 5}, sampled}, {{2, 3}, greedy(7)}};
  std::vector<std::string> devices = {"cpu"};
  if (xpu::seam_test_device()) devices.push_back("xpu:0");
  for (const std::string& device : devices) {
    CausalLM model =
        CausalLM::from_pretrained(kFixtures + "qwen3_head_dim_sliding", {.device = device, .progress = false});
    const GenerationConfig gc = generation_config(model, "qwen3_head_dim_sliding");
    std::vector<std::vector<int64_t>> alone;
    for (const auto& [prompt, options] : requests) {
      Engine single(model, gc, {.num_blocks = 32});
      const RequestId id = single.add_request(prompt, options);
      alone.push_back(run(single).at(id));
    }
    Engine shared(model, gc, {.num_blocks = 64});
    std::vector<RequestId> ids;
    for (const auto& [prompt, options] : requests) ids.push_back(shared.add_request(prompt, options));
    const auto out = run(shared);
    for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(out.at(ids[i]), alone[i]) << device << " request " << i;
  }
}

// CausalLM::split_step: the rows left to the host come back as forward() returns them, and only those; the
// others get the tokens queue_sample() chooses for them.
TEST(Engine, ASplitStepBringsBackOnlyTheLogitsOfTheRowsLeftToTheHost) {
  std::vector<std::string> devices = {"cpu"};
  if (xpu::seam_test_device()) devices.push_back("xpu:0");
  for (const std::string& device : devices) {
    CausalLM model = CausalLM::from_pretrained(kFixtures + "llama_gqa", {.device = device, .progress = false});
    auto batch_in = [](KVCache& cache) {  // four rows of logits: three of one sequence, the last of another
      BatchBuilder builder(cache);
      SequenceCache a, b;
      builder.add(a, {1, 5, 9}, Logits::all);
      builder.add(b, {2, 3, 4, 5}, Logits::last);
      return builder.finish();
    };
    KVCache cache = model.make_cache(8);
    const Tensor logits = model.forward(batch_in(cache), cache);
    const int64_t V = logits.size(1);
    RowSampling drawn;
    drawn.temperature = 0.7f;
    drawn.top_k = 30;
    drawn.key = 12345;
    KVCache sampled_cache = model.make_cache(8);
    const std::vector<int64_t> sampled =
        model.sample(batch_in(sampled_cache), sampled_cache, {RowSampling{}, drawn, drawn, RowSampling{}});

    KVCache split_cache = model.make_cache(8);
    CausalLM::SplitStep split =
        model.split_step(batch_in(split_cache), split_cache, {RowSampling{}, std::nullopt, drawn, std::nullopt});
    ASSERT_EQ(split.host_logits.shape(), (std::vector<int64_t>{2, V})) << device;
    for (int64_t i = 0; i < V; ++i) {
      ASSERT_EQ(split.host_logits.data<float>()[i], logits.data<float>()[V + i]) << device << " column " << i;
      ASSERT_EQ(split.host_logits.data<float>()[V + i], logits.data<float>()[3 * V + i]) << device << " column " << i;
    }
    ASSERT_TRUE(split.chosen.has_value());
    EXPECT_EQ(split.chosen->read(), (std::vector<int64_t>{sampled[0], sampled[2]})) << device;
  }
}

TEST(Engine, CancellingFreesBlocksAtOnce) {
  CausalLM model = load("llama_gqa");
  Engine engine(model, generation_config(model, "llama_gqa"), {.block_size = 4, .num_blocks = 16});
  const RequestId id = engine.add_request({1, 2, 3, 4, 5, 6, 7, 8, 9}, greedy(40));
  engine.step();
  EXPECT_GT(engine.stats().blocks_used, 0);
  engine.cancel(id);
  EXPECT_EQ(engine.stats().blocks_used, 0);
  EXPECT_FALSE(engine.has_unfinished());
}

TEST(Engine, LogProbabilitiesAreOfTheChosenTokensDistribution) {
  CausalLM model = load("llama_gqa");
  Engine engine(model, generation_config(model, "llama_gqa"), {.num_blocks = 16});
  RequestOptions o = greedy(3);
  o.sampling.top_logprobs = 4;
  engine.add_request({1, 17, 42}, o);
  while (engine.has_unfinished()) {
    for (const RequestOutput& out : engine.step()) {
      ASSERT_EQ(out.logprobs.size(), 1u);
      const TokenLogprobs& lp = out.logprobs[0];
      ASSERT_EQ(lp.top.size(), 4u);
      EXPECT_EQ(lp.top[0].first, out.new_tokens[0]);  // greedy: the most likely
      EXPECT_DOUBLE_EQ(lp.top[0].second, lp.logprob);
      EXPECT_LE(lp.logprob, 0);
      for (size_t i = 1; i < lp.top.size(); ++i) EXPECT_LE(lp.top[i].second, lp.top[i - 1].second);
    }
  }
}

TEST(Engine, RefusesWhatCannotRun) {
  CausalLM model = load("llama_gqa");
  Engine engine(model, generation_config(model, "llama_gqa"), {.block_size = 4, .num_blocks = 4});
  EXPECT_THROW(engine.add_request({}), Error);
  EXPECT_THROW(engine.add_request({1, 320}), Error);  // outside the vocabulary of 320
  EXPECT_THROW(engine.add_request({1, 2}, greedy(100)), Error);  // more tokens than 4 blocks of 4 hold
  RequestOptions bad;
  bad.generation = {{"temperature", -1.0}, {"do_sample", true}};
  EXPECT_THROW(engine.add_request({1, 2}, bad), Error);
  EXPECT_FALSE(engine.has_unfinished());
}

// Errors name the request: by its id, or as the caller names it (generate(): "prompt i").
TEST(Engine, ErrorsNameTheRequest) {
  CausalLM model = load("llama_gqa");
  Engine engine(model, generation_config(model, "llama_gqa"), {.num_blocks = 8});
  EXPECT_EQ(test_support::error_of([&] { engine.add_request({}); }), "request 1 is empty");
  RequestOptions named;
  named.name = "prompt 3";
  EXPECT_EQ(test_support::error_of([&] { engine.add_request({1, 320}, named); }),
            "token id 320 in prompt 3 is outside the vocabulary (size 320)");
}

// A growing cache starts empty and grows only as far as its requests go: a huge limit reserves nothing, and
// requests that outgrow the first blocks are never preempted.
TEST(Engine, AGrowingCacheGrowsWithItsRequests) {
  CausalLM model = load("llama_gqa");
  const auto prompts = parity::reference("llama_gqa");
  Engine engine(model, generation_config(model, "llama_gqa"), {.grow_cache = true});
  EXPECT_EQ(engine.cache().pool.num_blocks(), 0);
  RequestOptions huge;
  huge.generation = {{"max_new_tokens", int64_t{1000000000000}}, {"eos_token_id", prompts[1].generated[5]}};
  const RequestId id = engine.add_request(prompts[1].ids, huge);
  EXPECT_EQ(run(engine).at(id).size(), 6u);
  // Room for 256 tokens past the prompt.
  EXPECT_EQ(engine.cache().pool.num_blocks(), blocks_for(static_cast<int64_t>(prompts[1].ids.size()) + 256, 16));

  std::vector<RequestId> ids;
  for (const auto& p : prompts) ids.push_back(engine.add_request(p.ids, greedy(400)));
  const auto out = run(engine);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(out.at(ids[i]).size(), 400u);
    EXPECT_EQ(std::vector<int64_t>(out.at(ids[i]).begin(), out.at(ids[i]).begin() + 24), prompts[i].generated) << i;
  }
  EXPECT_EQ(engine.stats().preemptions, 0);
  EXPECT_EQ(engine.stats().blocks_used, 0);
}

TEST(Engine, SizesItsCacheFromMemoryWithinWhatCanBeUsed) {
  CausalLM model = load("llama_gqa");
  const EngineConfig config{.scheduler = {.max_num_seqs = 3}, .block_size = 16};
  // max_position_embeddings 256: 16 blocks per sequence, 3 sequences.
  EXPECT_EQ(kv_cache_blocks(model, config), 48);
  EXPECT_THROW(kv_cache_blocks(model, {.max_memory_percent = 0}), Error);
}

}  // namespace
}  // namespace tfm

namespace tfm {
namespace {

// The engine's thread, stepping with asynchronous batching (the parameter) or without.
class AsyncEngineTest : public testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(AsyncBatching, AsyncEngineTest, testing::Bool());

// Requests from several threads at once through the engine's own thread: each gets what it gets alone.
TEST_P(AsyncEngineTest, ServesRequestsFromManyThreads) {
  CausalLM model = load("llama_gqa");
  const GenerationConfig gc = generation_config(model, "llama_gqa");
  Engine engine(
      model, gc,
      {.scheduler = {.max_batch_tokens = 64}, .block_size = 4, .num_blocks = 64, .async_batching = GetParam()});
  AsyncEngine async(engine);
  const auto prompts = parity::reference("llama_gqa");
  std::vector<std::thread> clients;
  std::vector<std::vector<int64_t>> got(12);
  for (size_t c = 0; c < got.size(); ++c) {
    clients.emplace_back([&, c] {
      std::mutex m;
      std::condition_variable done_cv;
      bool done = false;
      async.submit(prompts[c % prompts.size()].ids, greedy(24), [&](const RequestOutput& o) {
        std::lock_guard lock(m);
        got[c].insert(got[c].end(), o.new_tokens.begin(), o.new_tokens.end());
        if (o.finished) {
          done = true;
          done_cv.notify_all();
        }
      });
      std::unique_lock lock(m);
      done_cv.wait(lock, [&] { return done; });
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t c = 0; c < got.size(); ++c) EXPECT_EQ(got[c], prompts[c % prompts.size()].generated) << c;
  EXPECT_EQ(async.num_unfinished(), 0u);
  EXPECT_EQ(async.stats().blocks_used, 0);
}

TEST_P(AsyncEngineTest, CancelledRequestsGetNoMoreOutputAndFreeTheirBlocks) {
  CausalLM model = load("llama_gqa");
  Engine engine(model, generation_config(model, "llama_gqa"),
                {.block_size = 4, .num_blocks = 64, .async_batching = GetParam()});
  AsyncEngine async(engine);
  std::atomic<int> outputs{0};
  const RequestId id = async.submit({1, 2, 3}, greedy(200), [&](const RequestOutput&) { ++outputs; });
  while (outputs < 3) std::this_thread::yield();
  async.cancel(id);
  const int seen = outputs;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LE(outputs.load(), seen + 1);  // at most the step that was running
  EXPECT_EQ(async.num_unfinished(), 0u);
  EXPECT_EQ(async.stats().blocks_used, 0);
}

}  // namespace
}  // namespace tfm

// Continuous batching over one model: requests come and go at any step. Each step the scheduler plans which
// tokens to compute (plain data), the model runner computes them in one ragged batch and chooses the next
// tokens, and the engine applies each request's stopping criteria and hands out what was generated. The KV
// cache is one block pool on the model's device, sized from its free memory, or grown with the requests.
// With asynchronous batching the engine plans and queues each step before reading the tokens of the step the
// device is still running, so the host's work overlaps the device's; what each request gets is the same.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tfm/engine/model_runner.h"
#include "tfm/engine/scheduler.h"
#include "tfm/generation/decode_fn.h"
#include "tfm/generation/generation_config.h"
#include "tfm/generation/stopping.h"
#include "tfm/io/json.h"
#include "tfm/model/causal_lm.h"

namespace tfm {

struct EngineConfig {
  SchedulerConfig scheduler{};
  int64_t block_size = 16;
  std::optional<int64_t> num_blocks{};  // unset: as many as max_memory_percent of the free memory holds
  double max_memory_percent = 0.9;    // of the device's free memory, for the KV cache (Transformers' name)
  // Grow the cache with the requests instead of sizing it up front: it starts with num_blocks (unset: none)
  // and, when a step finds too few free blocks, grows to give every unfinished request room for 256 more
  // tokens (never past its length limit), at least doubling, so nothing is preempted and a huge
  // max_new_tokens costs memory only as far as generation goes. generate() runs so.
  bool grow_cache = false;
  // Asynchronous batching: each step is planned and queued while the device runs the one before, whose tokens
  // the next step takes on the device. Unset: on where the device runs apart from the host (cuda, xpu), off on
  // the cpu. Steps run one after another while a request needs its tokens on the host (logits processors the
  // device cannot run, penalties, log probabilities).
  std::optional<bool> async_batching{};
};

struct RequestOptions {
  // Overrides of the model's generation config, as generate(**kwargs): max_new_tokens, do_sample, temperature,
  // top_p, stop_strings, eos_token_id, seed, ...
  json::Object generation;
  SamplingOptions sampling;
  int priority = 0;     // under the priority policy, lower runs first
  uint64_t stream = 0;  // separates the draws of requests that share a seed (generate() gives each prompt's index)
  std::string name;     // how errors name the request (generate(): "prompt 2"); unset: "request <id>"
};

struct RequestOutput {
  RequestId id = 0;
  std::vector<int64_t> new_tokens;      // chosen in this step
  std::vector<TokenLogprobs> logprobs;  // one per new token, when the request asked for them
  bool finished = false;
  StopReason stop = StopReason::none;  // why it finished
  std::string error;                   // set when it finished because a step failed
};

struct EngineStats : SchedulerStats {
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  int64_t generated_tokens = 0;
  int64_t steps = 0;
};

class Engine {
 public:
  // `decode` turns ids into text for stop strings (needed only by requests that have them).
  Engine(CausalLM& model, GenerationConfig model_generation_config, EngineConfig config = {}, DecodeFn decode = {});
  ~Engine();

  // Checks the request (ids in the vocabulary, its options as generate() checks them, room for it in the cache)
  // and queues it; returns its id. Warnings Transformers would give for its options are logged (core/logging).
  RequestId add_request(const std::vector<int64_t>& prompt, const RequestOptions& options = {});
  // Forgets a request at once: its blocks return to the pool, no output follows.
  void cancel(RequestId id);
  bool has_unfinished() const { return scheduler_.has_unfinished(); }
  // One step: the tokens each running request generated, and which finished. With asynchronous batching a
  // step returns the tokens of the step before it (the first returns none), as that is when they are read.
  std::vector<RequestOutput> step();
  bool async_batching() const { return async_; }
  EngineStats stats() const;
  const KVCache& cache() const { return cache_; }

 private:
  struct Limits {
    std::unique_ptr<StoppingCriteria> stopping;
    int64_t max_length = 0;
    int64_t max_blocks = 0;  // the cache blocks the request holds at its length limit
  };

  // EngineConfig::grow_cache: makes room for a request that needs `wanted` blocks more than are free.
  void grow_cache(int64_t wanted);
  // Hands out the tokens a step chose: each request's stopping criteria decide whether it finished.
  std::vector<RequestOutput> deliver(const std::vector<SampledToken>& sampled);

  CausalLM& model_;
  GenerationConfig generation_config_;
  EngineConfig config_;
  DecodeFn decode_;
  KVCache cache_;
  Scheduler scheduler_;
  ModelRunner runner_;
  bool async_;
  std::map<RequestId, Limits> limits_;
  RequestId next_id_ = 1;
  int64_t generated_tokens_ = 0;
  int64_t steps_ = 0;
};

// Blocks of `block_size` tokens the KV cache of `model` starts with under `config`: config.num_blocks, or what
// max_memory_percent of the device's free memory holds, never more than max_num_seqs sequences of the
// model's whole context need (none when the cache grows).
int64_t kv_cache_blocks(const CausalLM& model, const EngineConfig& config);

}  // namespace tfm

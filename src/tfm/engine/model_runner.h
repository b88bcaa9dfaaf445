// The model runner: turns a step's plan (SchedulerOutput) into one ragged batch, runs the model over it, and
// chooses the next token of every request whose chunk samples, with that request's own logits processors and
// random generator. It keeps per request what choosing needs: the request's tokens (penalties look at them),
// its processors and its sampler. When the device can run every sampling request's processors (penalties,
// temperature, top-k, top-p, min-p: op::SampleRows) its tokens are chosen there and only ids come back; the
// logits of a request that needs them on the host (log probabilities, other processors) come back alone.
//
// A step is queued, then collected: when tokens are chosen on the device, the next step can be queued before
// this one's are read (asynchronous batching), its rows for them taking them from the device.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tfm/engine/scheduler.h"
#include "tfm/generation/generation_config.h"
#include "tfm/generation/logits_process.h"
#include "tfm/generation/sampling.h"
#include "tfm/model/causal_lm.h"

namespace tfm {

// What a request asks of token choice beyond its GenerationConfig: OpenAI's penalties and log probabilities.
struct SamplingOptions {
  double presence_penalty = 0;   // subtracted once from the logit of every token generated so far
  double frequency_penalty = 0;  // subtracted per occurrence among the generated tokens
  int64_t top_logprobs = -1;     // -1: no log probabilities; else the chosen token's and the n most likely
};

struct TokenLogprobs {
  double logprob = 0;                           // of the chosen token
  std::vector<std::pair<int64_t, double>> top;  // the most likely tokens, most likely first
};

struct SampledToken {
  RequestId id = 0;
  int64_t token = 0;
  int64_t position = 0;  // among the request's tokens
  std::optional<TokenLogprobs> logprobs;
};

class ModelRunner {
 public:
  // `cache` is the model's KV cache, whose blocks the scheduler hands out.
  ModelRunner(CausalLM& model, KVCache& cache);

  // Registers a request before its first step: the processors come from `config` (prepared) and `limits`, the
  // sampler (when config samples) from `seed` and `stream` (Sampler's). `name` is how errors name it.
  void add_request(RequestId id, std::string name, const std::vector<int64_t>& prompt,
                   const GenerationConfig& config, const LengthLimits& limits, const SamplingOptions& options,
                   uint64_t seed, uint64_t stream);
  void remove_request(RequestId id);

  // Whether a step may be queued while the one before is still being computed: every request's tokens are
  // chosen on the device, from nothing the host must know of the tokens before (no processor the device
  // cannot run, no penalties, no log probabilities).
  bool can_run_ahead() const;
  // Queues the plan's chunks as one batch. A chunk's last token may be kPendingToken: the one the step queued
  // last chose for that request, which the device puts in place. A step whose tokens are chosen on the host
  // runs at once, and only with no step queued.
  void queue(const SchedulerOutput& plan);
  // Steps queued and not collected.
  size_t queued() const { return queued_.size(); }
  // Waits for the oldest queued step; returns the token chosen for each sampling chunk, in plan order, and
  // appends it to that request's tokens. Requests removed since it was queued are left out.
  std::vector<SampledToken> collect();

 private:
  struct State {
    std::string name;
    std::vector<int64_t> tokens;  // prompt and generated, as generate()'s input_ids
    int64_t prompt_length = 0;
    bool removes_invalid_values = false;  // remove_invalid_values: its processor replaces NaN and infinities
    LogitsProcessorList processors;
    std::unique_ptr<Sampler> sampler;  // null: greedy
    SamplingOptions options;
    // When the device can choose this request's tokens: its settings but each step's key and penalties.
    std::optional<RowSampling> on_device;
    // The tokens the penalties touch (prompt tokens with the repetition penalty), with how often each was
    // generated; kept only for a request chosen on the device with penalties.
    std::map<int32_t, int64_t> penalized;
    // The EOS ids, suppressed while the token chosen is at a position before eos_allowed_from (min_length,
    // min_new_tokens).
    std::vector<int64_t> eos_ids;
    int64_t eos_allowed_from = 0;

    void append(int64_t token);
    // For the token at `position` among the request's tokens; takes the sampler's next key.
    RowSampling device_settings(int64_t position);
    // Greedy with nothing that reads or changes the logits first: the argmax is all it needs.
    bool plain_greedy() const {
      return !sampler && processors.empty() && options.presence_penalty == 0 &&
             options.frequency_penalty == 0 && options.top_logprobs < 0;
    }
  };
  // A step on its way: whose tokens it chooses and where they go.
  struct QueuedStep {
    std::vector<RequestId> ids;                     // of its sampling chunks, in logits-row order
    std::unordered_map<RequestId, int32_t> row_of;  // the inverse of `ids`: the next step looks rows up by it
    std::vector<int64_t> positions;                 // of each one's token among its request's tokens
    std::optional<StepIds> chosen;                  // chosen on the device
    std::vector<SampledToken> done;                 // chosen on the host (and appended) already
  };

  SampledToken choose(RequestId id, int64_t position, State& state, std::span<float> scores);
  // A token the device chose (-1: the row's logits were not finite), appended to the request's tokens.
  SampledToken accept(RequestId id, int64_t position, State& state, int64_t token);
  // Transformers would choose a token from NaN scores all the same; an error says why the text is nonsense.
  void check_finite(const State& state, bool finite) const;
  // The logits row of `id` in the step queued last, whose chosen token `id` waits for.
  int32_t row_in_last_step(RequestId id) const;

  CausalLM& model_;
  KVCache& cache_;
  std::map<RequestId, State> states_;
  std::deque<QueuedStep> queued_;
};

}  // namespace tfm

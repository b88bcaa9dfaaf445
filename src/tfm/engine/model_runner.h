// The model runner: turns a step's plan (SchedulerOutput) into one ragged batch, runs the model over it, and
// chooses the next token of every request whose chunk samples, with that request's own logits processors and
// random generator. It keeps per request what choosing needs: the request's tokens (penalties look at them),
// its processors and its sampler. When the device can run every sampling request's processors (penalties,
// temperature, top-k, top-p, min-p: op::SampleRows) the step's tokens are chosen there and only ids come back;
// otherwise the logits come to the host.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
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
  double logprob = 0;                              // of the chosen token
  std::vector<std::pair<int64_t, double>> top;  // the most likely tokens, most likely first
};

struct SampledToken {
  RequestId id = 0;
  int64_t token = 0;
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

  // Runs the plan's chunks as one batch; returns the token chosen for each sampling chunk, in plan order, and
  // appends it to that request's tokens.
  std::vector<SampledToken> run(const SchedulerOutput& plan);

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

    void append(int64_t token);
    RowSampling device_settings();  // takes the sampler's next key
    // Greedy with nothing that reads or changes the logits first: the argmax is all it needs.
    bool plain_greedy() const {
      return !sampler && processors.empty() && options.presence_penalty == 0 && options.frequency_penalty == 0 &&
             options.top_logprobs < 0;
    }
  };
  SampledToken choose(RequestId id, State& state, std::span<float> scores);
  // Transformers would choose a token from NaN scores all the same; an error says why the text is nonsense.
  void check_finite(const State& state, bool finite) const;
  // Appends each sampling chunk's token (one per chunk, in plan order) to its request.
  std::vector<SampledToken> record(const SchedulerOutput& plan, const std::vector<State*>& sampled,
                                   const std::vector<int64_t>& tokens);

  CausalLM& model_;
  KVCache& cache_;
  std::map<RequestId, State> states_;
};

}  // namespace tfm

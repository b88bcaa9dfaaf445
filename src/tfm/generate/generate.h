// generate(): a batch of prompts of any lengths continued on the engine (engine/engine.h), each prompt a
// request. Each step runs every unfinished sequence's new tokens through the model at once; a finished
// sequence leaves the batch and frees its cache.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tfm/generation/decode_fn.h"
#include "tfm/generation/generation_config.h"
#include "tfm/generation/stopping.h"
#include "tfm/io/json.h"
#include "tfm/model/causal_lm.h"

namespace tfm {

struct GenerateCallbacks {
  DecodeFn decode;  // needed for stop_strings; may be empty otherwise
  // Called with each new token of sequence `index` as soon as it is chosen (for streaming).
  std::function<void(size_t index, int64_t token)> on_token;
};

struct GenerateOutput {
  std::vector<std::vector<int64_t>>
      tokens;  // the generated ids of each prompt (EOS included when it stopped there)
  std::vector<StopReason> stop_reasons;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;  // until the first tokens, chosen from the prompts' logits
  double decode_seconds = 0;   // the rest
};

// The model folder's generation_config.json, or, when it has none, the generation fields of config.json (as
// Transformers' GenerationConfig.from_model_config).
GenerationConfig load_generation_config(const std::string& dir, const ModelConfig& config);

// `model_config` is the model's generation_config.json; `kwargs` override it as generate(**kwargs) does.
GenerateOutput generate(CausalLM& model, const std::vector<std::vector<int64_t>>& prompts,
                        const GenerationConfig& model_config, const json::Object& kwargs = {},
                        const GenerateCallbacks& callbacks = {});

}  // namespace tfm

// GenerationConfig: the generation parameters of Transformers v5 (generation/configuration_utils.py), read
// from a model's generation_config.json and overridden per call as generate(**kwargs) overrides them.
//
// As in v5, every field starts unset (None) and means "not chosen"; prepare_generation_config() fills what is
// still unset from the model's config and then from Transformers' global defaults, in generate()'s order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tfm/io/json.h"

namespace tfm {

struct GenerationConfig {
  // Length of the output.
  std::optional<int64_t> max_length;                     // prompt + generated; 20 by default
  std::optional<int64_t> max_new_tokens;                 // generated only; wins over max_length when set
  std::optional<int64_t> min_length;                     // prompt + generated; 0 by default
  std::optional<int64_t> min_new_tokens;                 // generated only; wins over min_length when set
  std::optional<double> max_time;                        // seconds from the start of generation
  std::optional<std::vector<std::string>> stop_strings;  // a JSON string or list of strings

  // Strategy. tfm runs greedy search and multinomial sampling (num_beams == 1).
  std::optional<bool> do_sample;
  std::optional<int64_t> num_beams;

  // Logits processing.
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> typical_p;
  std::optional<double> epsilon_cutoff;
  std::optional<double> eta_cutoff;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> no_repeat_ngram_size;
  std::optional<int64_t> forced_bos_token_id;               // forced as the first token of an empty prompt
  std::optional<std::vector<int64_t>> forced_eos_token_id;  // forced as the last token (int or list in JSON)
  std::optional<bool> remove_invalid_values;                // NaN -> 0, +-inf -> the largest finite float
  std::optional<std::vector<int64_t>> suppress_tokens;      // always -inf
  std::optional<std::vector<int64_t>> begin_suppress_tokens;  // -inf for the first generated token
  std::optional<bool> renormalize_logits;                     // log_softmax after every other processor

  // Special tokens. eos_token_id may be an int or a list in JSON; it is kept as a list (any id stops).
  std::optional<int64_t> pad_token_id;
  std::optional<int64_t> bos_token_id;
  std::optional<std::vector<int64_t>> eos_token_id;

  // Not a Transformers field (Transformers seeds globally with set_seed): the seed of multinomial sampling.
  // Unset means a fresh random seed per call.
  std::optional<uint64_t> seed;

  // Every other key as read (Transformers keeps unknown keys as attributes), in file order: metadata such as
  // transformers_version, fields tfm does not act on (use_cache, output_scores, ...), and custom entries.
  json::Object other;

  // Reads the keys of a generation_config.json object. Wrongly typed values of the fields above throw
  // tfm::Error naming the key; the result is validated (see validate()).
  static GenerationConfig from_json(const json::Value& value);
  // Reads a generation_config.json file; errors name the file.
  static GenerationConfig from_file(const std::string& path);
  // The config as a JSON object: the set fields above, then `other`; unset fields are left out.
  json::Value to_json() const;

  // Sets each key of kwargs, as GenerationConfig.update(**kwargs): a field key replaces the field (null
  // unsets it), a key of `other` replaces that entry. Returns the keys that matched nothing, in order. With
  // defaults_only, only unset fields are filled; with allow_custom_entries, unmatched keys go to `other`.
  std::vector<std::string> update(const json::Object& kwargs, bool defaults_only = false,
                                  bool allow_custom_entries = false);

  // Transformers' GenerationConfig.validate(): throws tfm::Error with Transformers' message where it raises
  // ValueError (max_new_tokens <= 0, num_return_sequences > 1 with greedy search, ...), and returns the
  // "minor issues" it would log (sampling-only flags without do_sample, ...), one message per flag.
  std::vector<std::string> validate() const;

  // The value a field has when unset: Transformers' _get_default_generation_params().
  static const json::Object& global_defaults();
};

// generate()'s merge: `model_config` (the model's generation_config.json) fills what the call does not set,
// the global defaults fill the rest, then `kwargs` (the call's arguments) override. A kwarg that is no
// generation parameter throws tfm::Error as Transformers' _validate_model_kwargs does; the minor issues
// validate() finds are logged as Transformers logs them.
struct PreparedGenerationConfig {
  GenerationConfig config;
  bool has_default_max_length = false;  // neither the model nor the call set max_length
  bool has_default_min_length = false;  // neither the model nor the call set min_length
};
PreparedGenerationConfig prepare_generation_config(const GenerationConfig& model_config,
                                                   const json::Object& kwargs = {});

// The length limits of one sequence, from a prepared config and that sequence's prompt length, as
// _prepare_generated_length and _validate_generated_length compute them (Transformers uses the padded batch
// length; with a ragged batch each sequence uses its own, which is what a batch of one gives in
// Transformers).
struct LengthLimits {
  int64_t max_length = 0;  // stop when prompt + generated reaches this
  int64_t min_length = 0;  // EOS is suppressed while prompt + generated is below this
};
// Throws tfm::Error when the prompt already reaches max_length (Transformers' ValueError); logs Transformers'
// warnings about the lengths.
LengthLimits resolve_length_limits(const PreparedGenerationConfig& prepared, int64_t prompt_length,
                                   std::optional<int64_t> max_position_embeddings = std::nullopt);

}  // namespace tfm

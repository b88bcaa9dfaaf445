// Stopping criteria of one sequence, with the semantics of Transformers' generation/stopping_criteria.py:
// the length limit, max_time, stop strings and EOS, checked after each new token.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tfm/generation/decode_fn.h"
#include "tfm/generation/generation_config.h"

namespace tfm {

// StopStringCriteria: stops when a stop string ends inside the text of the last token of input_ids, the
// string itself possibly spanning earlier tokens ("st"+"op", "sto"+"pper", "las"+"topper" all match "stop";
// "stop"+"at" does not, since the string must reach into the newest token). input_ids is the whole sequence,
// prompt included, as in Transformers.
class StopStringCriteria {
 public:
  StopStringCriteria(std::vector<std::string> stop_strings, DecodeFn decode);
  // The index of the stop string that matched, if any.
  std::optional<size_t> match(std::span<const int64_t> input_ids) const;
  const std::vector<std::string>& stop_strings() const { return stop_strings_; }

 private:
  std::vector<std::string> stop_strings_;
  DecodeFn decode_;
  size_t
      window_;  // tokens decoded per check: every token yields at least one byte, so the longest string + 1
};

enum class StopReason { none, max_length, max_time, stop_string, eos };

// All criteria generate() builds from a config (in Transformers' order: max length, max time, stop strings,
// EOS).
class StoppingCriteria {
 public:
  // `max_length` comes from resolve_length_limits. `decode` is needed only when the config has stop strings
  // (Transformers raises without a tokenizer; so does this). The max_time clock starts here. A sequence that
  // grows past `max_position_embeddings` goes on, with Transformers' warning (once).
  StoppingCriteria(const GenerationConfig& config, int64_t max_length, DecodeFn decode = nullptr,
                   std::optional<int64_t> max_position_embeddings = std::nullopt);
  // Checks a sequence (prompt + generated) after a new token was appended; the first criterion that holds.
  StopReason check(std::span<const int64_t> input_ids) const;

 private:
  int64_t max_length_;
  std::optional<int64_t> max_position_embeddings_;
  std::optional<double> max_time_;
  std::chrono::steady_clock::time_point start_;
  std::optional<StopStringCriteria> stop_strings_;
  std::vector<int64_t> eos_;
};

}  // namespace tfm

// Logits processors with the semantics of Transformers' generation/logits_process.py, applied to one
// sequence's float32 logits row at a time. `input_ids` is what Transformers passes as input_ids: that
// sequence's prompt and every token generated so far.
//
// build_logits_processors() builds the list in the order GenerationMixin._get_logits_processor builds it:
// sequence bias, repetition penalty, no-repeat n-gram, bad words, min length, min new tokens, forced BOS,
// forced EOS, inf/NaN removal, exponential length penalty, suppressed tokens, suppressed first tokens; then,
// when sampling, temperature, top-k, top-p, min-p, typical-p, epsilon, eta; and last the log-softmax of
// renormalize_logits. Greedy search is the argmax of the processed row; sampling draws from its softmax.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "tfm/generation/generation_config.h"

namespace tfm {

class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;
  // Processes one row of scores in place.
  virtual void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const = 0;
  // Transformers' class name, e.g. "TopPLogitsWarper".
  virtual std::string_view name() const = 0;
};

// Ids seen in input_ids are penalised: a score below 0 is multiplied by `penalty`, any other divided by it.
class RepetitionPenaltyLogitsProcessor : public LogitsProcessor {
 public:
  explicit RepetitionPenaltyLogitsProcessor(double penalty);  // penalty > 0
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "RepetitionPenaltyLogitsProcessor"; }

 private:
  float penalty_;
};

// Adds a bias to the token that would complete a biased sequence: a one-token sequence always, a longer one
// when input_ids ends with all but its last token. Biases of several sequences ending in one token add up.
class SequenceBiasLogitsProcessor : public LogitsProcessor {
 public:
  using Bias = std::pair<std::vector<int64_t>, float>;
  // Later entries for the same sequence replace earlier ones (Transformers keeps them in a dict).
  explicit SequenceBiasLogitsProcessor(const std::vector<Bias>& sequence_bias);
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "SequenceBiasLogitsProcessor"; }

 private:
  std::vector<Bias> biases_;
};

// Bans the token that would complete a bad-word sequence (a sequence bias of -inf). Sequences that are
// exactly one EOS id are dropped, so EOS stays possible.
class NoBadWordsLogitsProcessor : public SequenceBiasLogitsProcessor {
 public:
  NoBadWordsLogitsProcessor(const std::vector<std::vector<int64_t>>& bad_words_ids,
                            const std::vector<int64_t>& eos_token_ids);
  std::string_view name() const override { return "NoBadWordsLogitsProcessor"; }
};

// Bans (-inf) every token that would complete an n-gram already present in input_ids.
class NoRepeatNGramLogitsProcessor : public LogitsProcessor {
 public:
  explicit NoRepeatNGramLogitsProcessor(int64_t ngram_size);  // ngram_size > 0
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "NoRepeatNGramLogitsProcessor"; }

 private:
  size_t n_;
};

// EOS ids get -inf while input_ids is shorter than min_length.
class MinLengthLogitsProcessor : public LogitsProcessor {
 public:
  MinLengthLogitsProcessor(int64_t min_length, std::vector<int64_t> eos_token_ids);
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "MinLengthLogitsProcessor"; }

 private:
  int64_t min_length_;
  std::vector<int64_t> eos_;
};

// EOS ids get -inf while fewer than min_new_tokens tokens follow the prompt.
class MinNewTokensLengthLogitsProcessor : public LogitsProcessor {
 public:
  MinNewTokensLengthLogitsProcessor(int64_t prompt_length_to_skip, int64_t min_new_tokens,
                                    std::vector<int64_t> eos_token_ids);
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "MinNewTokensLengthLogitsProcessor"; }

 private:
  int64_t prompt_length_;
  int64_t min_new_tokens_;
  std::vector<int64_t> eos_;
};

// With an empty prompt (input_ids of length 1), every token but bos_token_id gets -inf and it gets 0.
class ForcedBOSTokenLogitsProcessor : public LogitsProcessor {
 public:
  explicit ForcedBOSTokenLogitsProcessor(int64_t bos_token_id);
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "ForcedBOSTokenLogitsProcessor"; }

 private:
  int64_t bos_;
};

// When one token is left before max_length, only the EOS ids stay possible (at 0).
class ForcedEOSTokenLogitsProcessor : public LogitsProcessor {
 public:
  ForcedEOSTokenLogitsProcessor(int64_t max_length, std::vector<int64_t> eos_token_ids);  // ids >= 0
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "ForcedEOSTokenLogitsProcessor"; }

 private:
  int64_t max_length_;
  std::vector<int64_t> eos_;
};

// NaN becomes 0, +inf and -inf the largest and lowest finite float32.
class InfNanRemoveLogitsProcessor : public LogitsProcessor {
 public:
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "InfNanRemoveLogitsProcessor"; }
};

// exponential_decay_length_penalty = (start_index, factor): once more than start_index tokens follow the
// prompt, each EOS score grows by |score| * (factor^(tokens past start_index) - 1).
class ExponentialDecayLengthPenalty : public LogitsProcessor {
 public:
  ExponentialDecayLengthPenalty(int64_t start_index, double factor, std::vector<int64_t> eos_token_ids,
                                int64_t prompt_length);
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "ExponentialDecayLengthPenalty"; }

 private:
  int64_t regulation_start_;
  double factor_;
  std::vector<int64_t> eos_;
};

// The listed ids always get -inf.
class SuppressTokensLogitsProcessor : public LogitsProcessor {
 public:
  explicit SuppressTokensLogitsProcessor(std::vector<int64_t> suppress_tokens);
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "SuppressTokensLogitsProcessor"; }

 private:
  std::vector<int64_t> ids_;
};

// The listed ids get -inf when input_ids has exactly begin_index tokens (the first generated token).
class SuppressTokensAtBeginLogitsProcessor : public LogitsProcessor {
 public:
  SuppressTokensAtBeginLogitsProcessor(std::vector<int64_t> begin_suppress_tokens, int64_t begin_index);
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "SuppressTokensAtBeginLogitsProcessor"; }

 private:
  std::vector<int64_t> ids_;
  int64_t begin_index_;
};

class TemperatureLogitsWarper : public LogitsProcessor {
 public:
  explicit TemperatureLogitsWarper(double temperature);  // temperature > 0
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "TemperatureLogitsWarper"; }

 private:
  float temperature_;
};

// Keeps the top_k highest scores and every score tied with the k-th; the rest become -inf.
class TopKLogitsWarper : public LogitsProcessor {
 public:
  explicit TopKLogitsWarper(int64_t top_k, int64_t min_tokens_to_keep = 1);  // top_k > 0
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "TopKLogitsWarper"; }

 private:
  int64_t top_k_;
};

// Nucleus filtering: drops the least likely tokens whose cumulative probability stays within 1 - top_p.
class TopPLogitsWarper : public LogitsProcessor {
 public:
  explicit TopPLogitsWarper(double top_p, int64_t min_tokens_to_keep = 1);  // 0 <= top_p <= 1
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "TopPLogitsWarper"; }

 private:
  double top_p_;
  int64_t min_tokens_to_keep_;
};

// Drops tokens whose probability is below min_p times the top token's probability.
class MinPLogitsWarper : public LogitsProcessor {
 public:
  explicit MinPLogitsWarper(double min_p, int64_t min_tokens_to_keep = 1);  // 0 <= min_p <= 1
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "MinPLogitsWarper"; }

 private:
  double min_p_;
  int64_t min_tokens_to_keep_;
};

// Locally typical filtering: keeps the tokens whose surprisal is closest to the entropy, up to mass
// `typical_p`.
class TypicalLogitsWarper : public LogitsProcessor {
 public:
  explicit TypicalLogitsWarper(double mass, int64_t min_tokens_to_keep = 1);  // 0 < mass < 1
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "TypicalLogitsWarper"; }

 private:
  double mass_;
  int64_t min_tokens_to_keep_;
};

// Drops tokens whose probability is below epsilon, keeping the min_tokens_to_keep highest scores.
class EpsilonLogitsWarper : public LogitsProcessor {
 public:
  explicit EpsilonLogitsWarper(double epsilon, int64_t min_tokens_to_keep = 1);  // 0 < epsilon < 1
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "EpsilonLogitsWarper"; }

 private:
  double epsilon_;
  int64_t min_tokens_to_keep_;
};

// Eta sampling: the cut is min(epsilon, sqrt(epsilon) * exp(-entropy)).
class EtaLogitsWarper : public LogitsProcessor {
 public:
  explicit EtaLogitsWarper(double epsilon, int64_t min_tokens_to_keep = 1);  // 0 < epsilon < 1
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "EtaLogitsWarper"; }

 private:
  double epsilon_;
  int64_t min_tokens_to_keep_;
};

// log_softmax of the row (renormalize_logits), always the last processor.
class LogitNormalization : public LogitsProcessor {
 public:
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const override;
  std::string_view name() const override { return "LogitNormalization"; }
};

class LogitsProcessorList {
 public:
  void push_back(std::unique_ptr<LogitsProcessor> p) { processors_.push_back(std::move(p)); }
  // Applies every processor in order.
  void operator()(std::span<const int64_t> input_ids, std::span<float> scores) const;
  size_t size() const { return processors_.size(); }
  bool empty() const { return processors_.empty(); }
  const LogitsProcessor& operator[](size_t i) const { return *processors_[i]; }

 private:
  std::vector<std::unique_ptr<LogitsProcessor>> processors_;
};

// The processors generate() applies for `config` (prepared: defaults filled, see prepare_generation_config)
// to a sequence whose prompt has `prompt_length` tokens and whose lengths are `limits`
// (resolve_length_limits). Invalid values throw tfm::Error with Transformers' message (temperature <= 0 when
// sampling, top_p outside [0, 1], ...); generation features tfm does not implement (beam search,
// bad_words_ids, sequence_bias, ...) throw tfm::Error naming the field rather than being ignored.
LogitsProcessorList build_logits_processors(const GenerationConfig& config, int64_t prompt_length,
                                            const LengthLimits& limits);

}  // namespace tfm

// Logits processors with the semantics of Transformers' generation/logits_process.py, applied to one
// sequence's float32 logits row at a time. `input_ids` is what Transformers passes as input_ids: that
// sequence's prompt and every token generated so far.
//
// build_logits_processors() builds the list in the order GenerationMixin._get_logits_processor builds it:
// repetition penalty, no-repeat n-gram, min length, min new tokens, then (when sampling) temperature, top-k,
// top-p, min-p, typical-p. Greedy search is the argmax of the processed row; sampling draws from its softmax.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "tfm/generate/generation_config.h"

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
// to a sequence whose prompt has `prompt_length` tokens and whose minimum total length is `min_length` (see
// resolve_length_limits). Invalid values throw tfm::Error with Transformers' message (temperature <= 0 when
// sampling, top_p outside [0, 1], ...); generation features tfm does not implement (beam search,
// bad_words_ids, suppress_tokens, ...) throw tfm::Error naming the field rather than being ignored.
LogitsProcessorList build_logits_processors(const GenerationConfig& config, int64_t prompt_length,
                                            int64_t min_length);

}  // namespace tfm

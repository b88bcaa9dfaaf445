#include "tfm/generation/logits_process.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tfm/core/error.h"
#include "tfm/io/json.h"

namespace tfm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Python's str() of a float, for Transformers' messages.
std::string py(double d) {
  return json::python_float_repr(d);
}

// softmax(scores) computed in double and rounded to float32, as the float32 tensors Transformers compares.
std::vector<float> softmax(std::span<const float> scores) {
  const float max = *std::max_element(scores.begin(), scores.end());
  std::vector<double> e(scores.size(), 0.0);
  double sum = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores[i] != kNegInf) sum += e[i] = std::exp(double(scores[i]) - double(max));  // filtered: exactly 0
  }
  std::vector<float> p(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) p[i] = float(e[i] / sum);
  return p;
}

// Ascending order with NaN above everything (as torch.sort places it), so the comparison stays a strict weak
// order; ties keep index order (torch leaves the order of ties unspecified: its CPU sort is not stable).
bool ascending(float a, float b) {
  return a < b || (std::isnan(b) && !std::isnan(a));
}

// Sorts `indices` by ascending keys[index], ties by index.
void sort_ascending(std::span<const float> keys, std::vector<size_t>& indices) {
  std::vector<std::pair<float, size_t>> keyed(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) keyed[i] = {keys[indices[i]], indices[i]};
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    return ascending(a.first, b.first) || (!ascending(b.first, a.first) && a.second < b.second);
  });
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = keyed[i].second;
}

// The k-th highest score (k clipped to the row): a min-heap of the k best, one pass over the row.
float kth_highest(std::span<const float> scores, int64_t k) {
  const size_t n = std::min<size_t>(scores.size(), size_t(k));
  std::vector<float> heap(scores.begin(), scores.begin() + static_cast<ptrdiff_t>(n));
  std::make_heap(heap.begin(), heap.end(), std::greater<float>());
  for (size_t i = n; i < scores.size(); ++i) {
    if (scores[i] > heap.front()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<float>());
      heap.back() = scores[i];
      std::push_heap(heap.begin(), heap.end(), std::greater<float>());
    }
  }
  return heap.front();
}

size_t checked_id(int64_t id, size_t vocab_size, std::string_view what) {
  check(id >= 0 && static_cast<uint64_t>(id) < vocab_size, what, ": token id ", id,
        " is outside the logits row (vocabulary size ", vocab_size, ")");
  return static_cast<size_t>(id);
}

void check_min_tokens_to_keep(int64_t n) {
  check(n >= 1, "`min_tokens_to_keep` has to be a positive integer, but is ", n);
}

void suppress(std::span<float> scores, const std::vector<int64_t>& ids) {
  // torch.isin over the vocabulary: ids outside the row simply match nothing.
  for (int64_t id : ids) {
    if (id >= 0 && static_cast<uint64_t>(id) < scores.size()) scores[static_cast<size_t>(id)] = kNegInf;
  }
}

}  // namespace

RepetitionPenaltyLogitsProcessor::RepetitionPenaltyLogitsProcessor(double penalty)
    : penalty_(float(penalty)) {
  check(penalty > 0, "`penalty` has to be a strictly positive float, but is ", py(penalty));
}

void RepetitionPenaltyLogitsProcessor::operator()(std::span<const int64_t> input_ids,
                                                  std::span<float> scores) const {
  // Gather every seen id's score first, then write: a repeated id is penalised once.
  std::vector<size_t> seen;
  seen.reserve(input_ids.size());
  for (int64_t id : input_ids) seen.push_back(checked_id(id, scores.size(), "repetition_penalty"));
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (size_t i : seen) scores[i] = scores[i] < 0 ? scores[i] * penalty_ : scores[i] / penalty_;
}

SequenceBiasLogitsProcessor::SequenceBiasLogitsProcessor(const std::vector<Bias>& sequence_bias) {
  for (const Bias& b : sequence_bias) {
    check(!b.first.empty(), "`sequence_bias` holds an empty sequence");
    for (int64_t id : b.first) check(id >= 0, "`sequence_bias` holds a negative token id ", id);
    auto same =
        std::find_if(biases_.begin(), biases_.end(), [&](const Bias& x) { return x.first == b.first; });
    if (same != biases_.end()) {
      same->second = b.second;
    } else {
      biases_.push_back(b);
    }
  }
}

void SequenceBiasLogitsProcessor::operator()(std::span<const int64_t> input_ids,
                                             std::span<float> scores) const {
  std::vector<int64_t> invalid;
  for (const Bias& b : biases_) {
    for (int64_t id : b.first) {
      if (static_cast<uint64_t>(id) >= scores.size()) invalid.push_back(id);
    }
  }
  if (!invalid.empty()) {
    throw_error("The model vocabulary size is ", scores.size(),
                ", but the following tokens were being biased: ",
                json::dump(json::Array(invalid.begin(), invalid.end())));
  }
  // The bias row in float32 as Transformers sums it: one-token biases set, longer matching sequences added.
  std::vector<float> bias(scores.size(), 0.0f);
  for (const Bias& b : biases_) {
    if (b.first.size() == 1) bias[static_cast<size_t>(b.first[0])] = b.second;
  }
  for (const auto& [ids, value] : biases_) {
    if (ids.size() == 1 || ids.size() > input_ids.size()) continue;
    const size_t prefix = ids.size() - 1;
    if (std::equal(ids.begin(), ids.end() - 1, input_ids.end() - static_cast<ptrdiff_t>(prefix))) {
      bias[static_cast<size_t>(ids.back())] += value;
    }
  }
  for (size_t i = 0; i < scores.size(); ++i) scores[i] += bias[i];
}

namespace {

std::vector<SequenceBiasLogitsProcessor::Bias> bad_words_as_biases(
    const std::vector<std::vector<int64_t>>& bad_words, const std::vector<int64_t>& eos) {
  check(!bad_words.empty(), "`bad_words_ids` has to be a non-empty list, but is []");
  std::vector<SequenceBiasLogitsProcessor::Bias> out;
  for (const std::vector<int64_t>& words : bad_words) {
    for (int64_t id : words) {
      check(id >= 0, "Each list in `bad_words_ids` has to be a list of positive integers, but is ", id);
    }
    const bool is_eos = words.size() == 1 && std::find(eos.begin(), eos.end(), words[0]) != eos.end();
    if (!is_eos) out.emplace_back(words, -std::numeric_limits<float>::infinity());
  }
  return out;
}

}  // namespace

NoBadWordsLogitsProcessor::NoBadWordsLogitsProcessor(const std::vector<std::vector<int64_t>>& bad_words_ids,
                                                     const std::vector<int64_t>& eos_token_ids)
    : SequenceBiasLogitsProcessor(bad_words_as_biases(bad_words_ids, eos_token_ids)) {}

NoRepeatNGramLogitsProcessor::NoRepeatNGramLogitsProcessor(int64_t ngram_size) : n_(size_t(ngram_size)) {
  check(ngram_size > 0, "`ngram_size` has to be a strictly positive integer, but is ", ngram_size);
}

void NoRepeatNGramLogitsProcessor::operator()(std::span<const int64_t> input_ids,
                                              std::span<float> scores) const {
  const size_t len = input_ids.size();
  if (len < n_) return;  // no complete n-gram yet
  // The next token completes an n-gram whose first n-1 tokens are the current suffix; every earlier window
  // starting with that suffix bans its last token.
  const std::span<const int64_t> prefix = input_ids.subspan(len + 1 - n_);
  std::vector<size_t> banned;
  for (size_t start = 0; start + n_ <= len; ++start) {
    if (std::equal(prefix.begin(), prefix.end(), input_ids.begin() + start)) {
      banned.push_back(checked_id(input_ids[start + n_ - 1], scores.size(), "no_repeat_ngram_size"));
    }
  }
  for (size_t i : banned) scores[i] = kNegInf;
}

MinLengthLogitsProcessor::MinLengthLogitsProcessor(int64_t min_length, std::vector<int64_t> eos_token_ids)
    : min_length_(min_length), eos_(std::move(eos_token_ids)) {
  check(min_length >= 0, "`min_length` has to be a non-negative integer, but is ", min_length);
}

void MinLengthLogitsProcessor::operator()(std::span<const int64_t> input_ids, std::span<float> scores) const {
  if (static_cast<int64_t>(input_ids.size()) < min_length_) suppress(scores, eos_);
}

MinNewTokensLengthLogitsProcessor::MinNewTokensLengthLogitsProcessor(int64_t prompt_length_to_skip,
                                                                     int64_t min_new_tokens,
                                                                     std::vector<int64_t> eos_token_ids)
    : prompt_length_(prompt_length_to_skip), min_new_tokens_(min_new_tokens), eos_(std::move(eos_token_ids)) {
  check(prompt_length_to_skip >= 0, "`prompt_length_to_skip` has to be a positive integer, but is ",
        prompt_length_to_skip);
  check(min_new_tokens >= 0, "`min_new_tokens` has to be a positive integer, but is ", min_new_tokens);
}

void MinNewTokensLengthLogitsProcessor::operator()(std::span<const int64_t> input_ids,
                                                   std::span<float> scores) const {
  if (static_cast<int64_t>(input_ids.size()) - prompt_length_ < min_new_tokens_) suppress(scores, eos_);
}

ForcedBOSTokenLogitsProcessor::ForcedBOSTokenLogitsProcessor(int64_t bos_token_id) : bos_(bos_token_id) {}

void ForcedBOSTokenLogitsProcessor::operator()(std::span<const int64_t> input_ids,
                                               std::span<float> scores) const {
  if (input_ids.size() != 1) return;
  const size_t bos = checked_id(bos_, scores.size(), "forced_bos_token_id");
  std::fill(scores.begin(), scores.end(), kNegInf);
  scores[bos] = 0;
}

ForcedEOSTokenLogitsProcessor::ForcedEOSTokenLogitsProcessor(int64_t max_length,
                                                             std::vector<int64_t> eos_token_ids)
    : max_length_(max_length), eos_(std::move(eos_token_ids)) {
  for (int64_t id : eos_) {
    check(id >= 0, "`eos_token_id` has to be a list of positive integers, but is ",
          json::dump(json::Array(eos_.begin(), eos_.end())));
  }
}

void ForcedEOSTokenLogitsProcessor::operator()(std::span<const int64_t> input_ids,
                                               std::span<float> scores) const {
  if (static_cast<int64_t>(input_ids.size()) != max_length_ - 1) return;
  std::vector<size_t> eos;
  for (int64_t id : eos_) eos.push_back(checked_id(id, scores.size(), "forced_eos_token_id"));
  std::fill(scores.begin(), scores.end(), kNegInf);
  for (size_t i : eos) scores[i] = 0;
}

void InfNanRemoveLogitsProcessor::operator()(std::span<const int64_t>, std::span<float> scores) const {
  for (float& s : scores) {
    if (std::isnan(s))
      s = 0;
    else if (s == -kNegInf)
      s = std::numeric_limits<float>::max();
    else if (s == kNegInf)
      s = std::numeric_limits<float>::lowest();
  }
}

ExponentialDecayLengthPenalty::ExponentialDecayLengthPenalty(int64_t start_index, double factor,
                                                             std::vector<int64_t> eos_token_ids,
                                                             int64_t prompt_length)
    : regulation_start_(start_index + prompt_length), factor_(factor), eos_(std::move(eos_token_ids)) {
  check(!eos_.empty(), "`exponential_decay_length_penalty` needs an `eos_token_id`");
  for (int64_t id : eos_) {
    check(id >= 0, "`eos_token_id` has to be a list of positive integers, but is ",
          json::dump(json::Array(eos_.begin(), eos_.end())));
  }
}

void ExponentialDecayLengthPenalty::operator()(std::span<const int64_t> input_ids,
                                               std::span<float> scores) const {
  const int64_t length = static_cast<int64_t>(input_ids.size());
  if (length <= regulation_start_) return;
  const float growth = float(std::pow(factor_, double(length - regulation_start_)) - 1.0);
  // Penalties are computed from the scores before any is added (an EOS id listed twice counts once).
  std::vector<std::pair<size_t, float>> penalties;
  for (int64_t id : eos_) {
    const size_t i = checked_id(id, scores.size(), "exponential_decay_length_penalty");
    penalties.emplace_back(i, std::fabs(scores[i]) * growth);
  }
  std::vector<bool> done(scores.size(), false);
  for (const auto& [i, penalty] : penalties) {
    if (!done[i]) scores[i] += penalty;
    done[i] = true;
  }
}

SuppressTokensLogitsProcessor::SuppressTokensLogitsProcessor(std::vector<int64_t> suppress_tokens)
    : ids_(std::move(suppress_tokens)) {}

void SuppressTokensLogitsProcessor::operator()(std::span<const int64_t>, std::span<float> scores) const {
  suppress(scores, ids_);
}

SuppressTokensAtBeginLogitsProcessor::SuppressTokensAtBeginLogitsProcessor(
    std::vector<int64_t> begin_suppress_tokens, int64_t begin_index)
    : ids_(std::move(begin_suppress_tokens)), begin_index_(begin_index) {}

void SuppressTokensAtBeginLogitsProcessor::operator()(std::span<const int64_t> input_ids,
                                                      std::span<float> scores) const {
  if (static_cast<int64_t>(input_ids.size()) == begin_index_) suppress(scores, ids_);
}

TemperatureLogitsWarper::TemperatureLogitsWarper(double temperature) : temperature_(float(temperature)) {
  if (!(temperature > 0)) {
    std::string msg =
        "`temperature` (=" + py(temperature) +
        ") has to be a strictly positive float, otherwise your next token scores will be invalid.";
    if (temperature == 0.0)
      msg += " If you're looking for greedy decoding strategies, set `do_sample=False`.";
    throw Error(msg);
  }
}

void TemperatureLogitsWarper::operator()(std::span<const int64_t>, std::span<float> scores) const {
  for (float& s : scores) s /= temperature_;
}

TopKLogitsWarper::TopKLogitsWarper(int64_t top_k, int64_t min_tokens_to_keep)
    : top_k_(std::max(top_k, min_tokens_to_keep)) {
  check(top_k > 0, "`top_k` has to be a strictly positive integer, but is ", top_k);
}

void TopKLogitsWarper::operator()(std::span<const int64_t>, std::span<float> scores) const {
  if (scores.empty()) return;
  const float kth = kth_highest(scores, top_k_);
  for (float& s : scores) {
    if (s < kth) s = kNegInf;
  }
}

TopPLogitsWarper::TopPLogitsWarper(double top_p, int64_t min_tokens_to_keep)
    : top_p_(top_p), min_tokens_to_keep_(min_tokens_to_keep) {
  // Transformers' check admits 0 and 1 (only values outside [0, 1] raise), though its message says otherwise;
  // NaN, which its comparisons let through, is refused.
  check(top_p >= 0 && top_p <= 1.0, "`top_p` has to be a float > 0 and < 1, but is ", py(top_p));
  check_min_tokens_to_keep(min_tokens_to_keep);
}

void TopPLogitsWarper::operator()(std::span<const int64_t>, std::span<float> scores) const {
  // Tokens already at -inf have probability 0 and sort first, so they would be removed (again): leaving them
  // out gives the same result and makes the sort cheap after top-k.
  std::vector<size_t> order;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores[i] != kNegInf) order.push_back(i);
  }
  sort_ascending(scores, order);
  std::vector<float> sorted(order.size());
  for (size_t i = 0; i < order.size(); ++i) sorted[i] = scores[order[i]];
  if (sorted.empty()) return;
  const std::vector<float> probs = softmax(sorted);
  // Remove the low tail whose cumulative probability stays within 1 - top_p; keep the top min_tokens_to_keep.
  const float threshold = float(1.0 - top_p_);
  const size_t keep_from = order.size() - std::min<size_t>(order.size(), size_t(min_tokens_to_keep_));
  double cumulative = 0;
  for (size_t i = 0; i < keep_from; ++i) {
    cumulative += probs[i];
    if (float(cumulative) <= threshold) scores[order[i]] = kNegInf;
  }
}

MinPLogitsWarper::MinPLogitsWarper(double min_p, int64_t min_tokens_to_keep)
    : min_p_(min_p), min_tokens_to_keep_(min_tokens_to_keep) {
  check(0 <= min_p && min_p <= 1.0, "`min_p` has to be a float in the [0, 1] interval, but is ", py(min_p));
  check_min_tokens_to_keep(min_tokens_to_keep);
}

void MinPLogitsWarper::operator()(std::span<const int64_t>, std::span<float> scores) const {
  const std::vector<float> probs = softmax(scores);
  const float top = *std::max_element(probs.begin(), probs.end());
  const float scaled_min_p = float(min_p_) * top;
  // The min_tokens_to_keep most probable tokens stay, whatever their probability.
  std::vector<size_t> order(probs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const size_t k = std::min<size_t>(order.size(), size_t(min_tokens_to_keep_));
  std::partial_sort(
      order.begin(), order.begin() + static_cast<ptrdiff_t>(k), order.end(),
      [&](size_t a, size_t b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); });
  std::vector<bool> keep(probs.size(), false);
  for (size_t i = 0; i < k; ++i) keep[order[i]] = true;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (probs[i] < scaled_min_p && !keep[i]) scores[i] = kNegInf;
  }
}

TypicalLogitsWarper::TypicalLogitsWarper(double mass, int64_t min_tokens_to_keep)
    : mass_(mass), min_tokens_to_keep_(min_tokens_to_keep) {
  check(mass > 0 && mass < 1, "`typical_p` has to be a float > 0 and < 1, but is ", py(mass));
  check_min_tokens_to_keep(min_tokens_to_keep);
}

void TypicalLogitsWarper::operator()(std::span<const int64_t>, std::span<float> scores) const {
  const size_t n = scores.size();
  // log_softmax, its probabilities and the entropy (nansum: -inf scores contribute nothing).
  const float max = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (float s : scores) sum += std::exp(double(s) - double(max));
  const double log_sum = std::log(sum);
  std::vector<float> normalized(n);
  double entropy = 0;
  for (size_t i = 0; i < n; ++i) {
    normalized[i] = float(double(scores[i]) - double(max) - log_sum);
    const double term = double(normalized[i]) * std::exp(double(normalized[i]));
    if (!std::isnan(term)) entropy -= term;
  }
  const float ent = float(entropy);
  std::vector<float> shifted(n);
  for (size_t i = 0; i < n; ++i) shifted[i] = std::fabs(-normalized[i] - ent);

  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  sort_ascending(shifted, order);
  std::vector<float> sorted_logits(n);
  for (size_t i = 0; i < n; ++i) sorted_logits[i] = scores[order[i]];
  const std::vector<float> probs = softmax(sorted_logits);
  // last_ind: how many cumulative probabilities stay below the mass, clamped to the last index.
  const float mass = float(mass_);
  size_t last = 0;
  double cumulative = 0;
  for (size_t i = 0; i < n; ++i) {
    cumulative += probs[i];
    if (float(cumulative) < mass) ++last;
  }
  last = std::min(last, n - 1);
  const float cutoff = shifted[order[last]];
  std::vector<size_t> removed;
  for (size_t i = size_t(std::min<int64_t>(min_tokens_to_keep_, int64_t(n))); i < n; ++i) {
    if (shifted[order[i]] > cutoff) removed.push_back(order[i]);
  }
  for (size_t i : removed) scores[i] = kNegInf;
}

namespace {

void check_cutoff(double epsilon, const char* name) {
  check(epsilon > 0 && epsilon < 1, "`", name, "` has to be a float > 0 and < 1, but is ", py(epsilon));
}

void filter_below(std::span<float> scores, const std::vector<float>& probs, float cut,
                  int64_t min_tokens_to_keep) {
  const float kth = kth_highest(scores, min_tokens_to_keep);
  for (size_t i = 0; i < scores.size(); ++i) {
    if (probs[i] < cut && scores[i] < kth) scores[i] = kNegInf;
  }
}

}  // namespace

EpsilonLogitsWarper::EpsilonLogitsWarper(double epsilon, int64_t min_tokens_to_keep)
    : epsilon_(epsilon), min_tokens_to_keep_(min_tokens_to_keep) {
  check_cutoff(epsilon, "epsilon_cutoff");
  check(min_tokens_to_keep >= 1, "`min_tokens_to_keep` has to be a strictly positive integer, but is ",
        min_tokens_to_keep);
}

void EpsilonLogitsWarper::operator()(std::span<const int64_t>, std::span<float> scores) const {
  filter_below(scores, softmax(scores), float(epsilon_), min_tokens_to_keep_);
}

EtaLogitsWarper::EtaLogitsWarper(double epsilon, int64_t min_tokens_to_keep)
    : epsilon_(epsilon), min_tokens_to_keep_(min_tokens_to_keep) {
  check_cutoff(epsilon, "eta_cutoff");
  check(min_tokens_to_keep >= 1, "`min_tokens_to_keep` has to be a strictly positive integer, but is ",
        min_tokens_to_keep);
}

void EtaLogitsWarper::operator()(std::span<const int64_t>, std::span<float> scores) const {
  const std::vector<float> probs = softmax(scores);
  // Categorical(logits=scores).entropy(): -sum p * log p, with -inf log-probabilities contributing nothing.
  const float max = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (float s : scores) sum += std::exp(double(s) - double(max));
  double entropy = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores[i] != kNegInf) entropy -= double(probs[i]) * (double(scores[i]) - double(max) - std::log(sum));
  }
  const float eps = float(epsilon_);
  const float eta = std::min(eps, std::sqrt(eps) * float(std::exp(-entropy)));
  filter_below(scores, probs, eta, min_tokens_to_keep_);
}

void LogitNormalization::operator()(std::span<const int64_t>, std::span<float> scores) const {
  const float max = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (float s : scores) sum += std::exp(double(s) - double(max));
  const double log_sum = std::log(sum);
  for (float& s : scores) s = float(double(s) - double(max) - log_sum);
}

void LogitsProcessorList::operator()(std::span<const int64_t> input_ids, std::span<float> scores) const {
  for (const auto& p : processors_) (*p)(input_ids, scores);
}

namespace {

const json::Value* other_value(const GenerationConfig& c, std::string_view key) {
  for (const auto& [k, v] : c.other) {
    if (k == key) return v.is_null() ? nullptr : &v;
  }
  return nullptr;
}

// sequence_bias as generation_config.json writes it: a list of [[token ids], bias] pairs.
std::vector<SequenceBiasLogitsProcessor::Bias> parse_sequence_bias(const json::Value& v) {
  const char* what = "`sequence_bias` has to be a non-empty list of [[token ids], float] pairs";
  check(v.is_array() && v.size() > 0, what, ", but is ", json::dump(v));
  std::vector<SequenceBiasLogitsProcessor::Bias> out;
  for (const json::Value& pair : v.as_array()) {
    check(pair.is_array() && pair.size() == 2 && pair[0].is_array() && pair[1].is_number(), what, ", but is ",
          json::dump(v));
    std::vector<int64_t> ids;
    for (const json::Value& id : pair[0].as_array()) {
      check(id.is_int(), what, ", but is ", json::dump(v));
      ids.push_back(id.as_int());
    }
    out.emplace_back(std::move(ids), static_cast<float>(pair[1].as_double()));
  }
  return out;
}

std::vector<std::vector<int64_t>> parse_bad_words(const json::Value& v) {
  check(v.is_array(), "`bad_words_ids` has to be a non-empty list, but is ", json::dump(v));
  std::vector<std::vector<int64_t>> out;
  for (const json::Value& words : v.as_array()) {
    check(words.is_array(), "`bad_words_ids` has to be a list of lists, but is ", json::dump(v));
    std::vector<int64_t> ids;
    for (const json::Value& id : words.as_array()) {
      check(id.is_int(), "Each list in `bad_words_ids` has to be a list of positive integers, but is ",
            json::dump(v));
      ids.push_back(id.as_int());
    }
    out.push_back(std::move(ids));
  }
  return out;
}

// Generation features Transformers would act on that tfm does not implement: refusing them is better than
// generating something else than asked.
void check_supported(const GenerationConfig& c) {
  check(!c.num_beams || *c.num_beams == 1, "generation config: num_beams=", c.num_beams.value_or(1),
        " asks for beam search, which tfm does not implement (it runs greedy search and sampling, "
        "num_beams=1)");
  auto refuse = [](std::string_view key) {
    throw_error("generation config: `", key, "` is set, but tfm does not implement that generation feature");
  };
  auto number_is = [&](std::string_view key, auto predicate) {
    const json::Value* v = other_value(c, key);
    return v != nullptr && v->is_number() && predicate(v->as_double());
  };
  for (const char* key : {"watermarking_config", "constraints", "force_words_ids", "dola_layers",
                          "prompt_lookup_num_tokens", "assistant_early_exit"}) {
    if (other_value(c, key)) refuse(key);
  }
  for (const char* key : {"token_healing", "use_mtp"}) {
    const json::Value* v = other_value(c, key);
    if (v && v->is_bool() && v->as_bool()) refuse(key);
  }
  if (number_is("guidance_scale", [](double g) { return g != 1; })) refuse("guidance_scale");
  if (number_is("penalty_alpha", [](double a) { return a > 0; }) && c.top_k.value_or(0) > 1 &&
      c.do_sample != true) {
    refuse("penalty_alpha");
  }
  if (c.do_sample == true && other_value(c, "top_h")) refuse("top_h");
}

}  // namespace

LogitsProcessorList build_logits_processors(const GenerationConfig& c, int64_t prompt_length,
                                            const LengthLimits& limits) {
  check_supported(c);
  LogitsProcessorList list;
  if (const json::Value* bias = other_value(c, "sequence_bias")) {
    list.push_back(std::make_unique<SequenceBiasLogitsProcessor>(parse_sequence_bias(*bias)));
  }
  if (c.repetition_penalty && *c.repetition_penalty != 1.0) {
    list.push_back(std::make_unique<RepetitionPenaltyLogitsProcessor>(*c.repetition_penalty));
  }
  if (c.no_repeat_ngram_size && *c.no_repeat_ngram_size > 0) {
    list.push_back(std::make_unique<NoRepeatNGramLogitsProcessor>(*c.no_repeat_ngram_size));
  }
  if (const json::Value* bad_words = other_value(c, "bad_words_ids")) {
    list.push_back(std::make_unique<NoBadWordsLogitsProcessor>(
        parse_bad_words(*bad_words), c.eos_token_id.value_or(std::vector<int64_t>{})));
  }
  if (c.eos_token_id && limits.min_length > 0) {
    list.push_back(std::make_unique<MinLengthLogitsProcessor>(limits.min_length, *c.eos_token_id));
  }
  if (c.eos_token_id && c.min_new_tokens && *c.min_new_tokens > 0) {
    list.push_back(std::make_unique<MinNewTokensLengthLogitsProcessor>(prompt_length, *c.min_new_tokens,
                                                                       *c.eos_token_id));
  }
  if (c.forced_bos_token_id)
    list.push_back(std::make_unique<ForcedBOSTokenLogitsProcessor>(*c.forced_bos_token_id));
  if (c.forced_eos_token_id) {
    list.push_back(
        std::make_unique<ForcedEOSTokenLogitsProcessor>(limits.max_length, *c.forced_eos_token_id));
  }
  if (c.remove_invalid_values == true) list.push_back(std::make_unique<InfNanRemoveLogitsProcessor>());
  if (const json::Value* decay = other_value(c, "exponential_decay_length_penalty")) {
    check(decay->is_array() && decay->size() == 2 && (*decay)[0].is_int() && (*decay)[1].is_number(),
          "`exponential_decay_length_penalty` has to be a pair (start_index, decay_factor), but is ",
          json::dump(*decay));
    list.push_back(std::make_unique<ExponentialDecayLengthPenalty>(
        (*decay)[0].as_int(), (*decay)[1].as_double(), c.eos_token_id.value_or(std::vector<int64_t>{}),
        prompt_length));
  }
  if (c.suppress_tokens) list.push_back(std::make_unique<SuppressTokensLogitsProcessor>(*c.suppress_tokens));
  if (c.begin_suppress_tokens) {
    // The first generated token; one later when a forced BOS fills an empty prompt.
    const int64_t begin = prompt_length > 1 || !c.forced_bos_token_id ? prompt_length : prompt_length + 1;
    list.push_back(std::make_unique<SuppressTokensAtBeginLogitsProcessor>(*c.begin_suppress_tokens, begin));
  }
  if (c.do_sample == true) {
    // Transformers builds the top-p, typical-p, epsilon and eta warpers only for values inside their ranges,
    // so that top_p=2 samples from everything without a word; here any value other than the neutral one gets
    // its warper, whose check rejects it in Transformers' words.
    const int64_t min_tokens_to_keep = 1;  // more only for beam search
    if (c.temperature && *c.temperature != 1.0) {
      list.push_back(std::make_unique<TemperatureLogitsWarper>(*c.temperature));
    }
    if (c.top_k && *c.top_k != 0)
      list.push_back(std::make_unique<TopKLogitsWarper>(*c.top_k, min_tokens_to_keep));
    if (c.top_p && *c.top_p != 1.0)
      list.push_back(std::make_unique<TopPLogitsWarper>(*c.top_p, min_tokens_to_keep));
    if (c.min_p) list.push_back(std::make_unique<MinPLogitsWarper>(*c.min_p, min_tokens_to_keep));
    if (c.typical_p && *c.typical_p != 1.0) {
      list.push_back(std::make_unique<TypicalLogitsWarper>(*c.typical_p, min_tokens_to_keep));
    }
    if (c.epsilon_cutoff && *c.epsilon_cutoff != 0.0) {
      list.push_back(std::make_unique<EpsilonLogitsWarper>(*c.epsilon_cutoff, min_tokens_to_keep));
    }
    if (c.eta_cutoff && *c.eta_cutoff != 0.0) {
      list.push_back(std::make_unique<EtaLogitsWarper>(*c.eta_cutoff, min_tokens_to_keep));
    }
  }
  if (c.renormalize_logits == true) list.push_back(std::make_unique<LogitNormalization>());
  return list;
}

}  // namespace tfm

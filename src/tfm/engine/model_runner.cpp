#include "tfm/engine/model_runner.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <string_view>
#include <utility>

#include "tfm/core/error.h"

namespace tfm {

namespace {

// The settings of a request whose processors op::SampleRows runs, all of them (each step's key, penalties and
// suppressed EOS ids left out), or nothing: log probabilities need the whole row on the host. The minimum
// lengths' -inf for EOS ids is a penalty of +inf (State::device_settings).
std::optional<RowSampling> device_sampling(const GenerationConfig& c, const LogitsProcessorList& processors,
                                           const SamplingOptions& o) {
  static constexpr std::string_view kOnDevice[] = {
      "RepetitionPenaltyLogitsProcessor", "MinLengthLogitsProcessor", "MinNewTokensLengthLogitsProcessor",
      "TemperatureLogitsWarper",          "TopKLogitsWarper",         "TopPLogitsWarper",
      "MinPLogitsWarper"};
  if (o.top_logprobs >= 0) return std::nullopt;
  for (size_t i = 0; i < processors.size(); ++i) {
    if (std::find(std::begin(kOnDevice), std::end(kOnDevice), processors[i].name()) == std::end(kOnDevice))
      return std::nullopt;
  }
  RowSampling r;
  r.repetition_penalty = static_cast<float>(c.repetition_penalty.value_or(1.0));
  if (c.do_sample.value_or(false)) {
    r.temperature = static_cast<float>(c.temperature.value_or(1.0));
    r.top_k = c.top_k.value_or(0);
    r.top_p = static_cast<float>(c.top_p.value_or(1.0));
    r.min_p = static_cast<float>(c.min_p.value_or(0.0));
  }
  return r;
}

bool has_penalties(const RowSampling& r, const SamplingOptions& o) {
  return r.repetition_penalty != 1.f || o.presence_penalty != 0 || o.frequency_penalty != 0;
}

}  // namespace

ModelRunner::ModelRunner(CausalLM& model, KVCache& cache) : model_(model), cache_(cache) {}

void ModelRunner::State::append(int64_t token) {
  tokens.push_back(token);
  if (on_device && has_penalties(*on_device, options)) ++penalized[static_cast<int32_t>(token)];
}

RowSampling ModelRunner::State::device_settings(int64_t position) {
  RowSampling r = *on_device;
  if (sampler) r.key = sampler->next_key();
  // A logit minus +inf is -inf, as the minimum lengths' processors set it (whatever the other penalties), and
  // stays -inf through the repetition penalty and the temperature.
  const bool eos_suppressed = position < eos_allowed_from;
  if (eos_suppressed) {
    for (int64_t eos : eos_ids) {
      // An id past int32 matches no row, as on the host, where an id outside the row matches nothing.
      if (eos >= 0 && eos <= std::numeric_limits<int32_t>::max())
        r.penalized.emplace_back(static_cast<int32_t>(eos), INFINITY);
    }
  }
  for (const auto& [token, generated] : penalized) {
    if (eos_suppressed && std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end()) continue;
    // As choose() subtracts them on the host: summed in double, rounded once.
    const double amount =
        generated > 0 ? options.presence_penalty + options.frequency_penalty * static_cast<double>(generated)
                      : 0.0;
    r.penalized.emplace_back(token, static_cast<float>(amount));
  }
  return r;
}

void ModelRunner::add_request(RequestId id, std::string name, const std::vector<int64_t>& prompt,
                              const GenerationConfig& config, const LengthLimits& limits,
                              const SamplingOptions& options, uint64_t seed, uint64_t stream) {
  check(!states_.count(id), "model runner: request ", id, " was added twice");
  check(options.top_logprobs <= 20, "top_logprobs must be at most 20, got ", options.top_logprobs);
  State s;
  s.name = std::move(name);
  s.tokens = prompt;
  s.prompt_length = static_cast<int64_t>(prompt.size());
  s.removes_invalid_values = config.remove_invalid_values == true;
  s.processors = build_logits_processors(config, s.prompt_length, limits);
  if (config.do_sample.value_or(false)) s.sampler = std::make_unique<Sampler>(seed, stream);
  s.options = options;
  s.on_device = device_sampling(config, s.processors, options);
  if (config.eos_token_id) {
    // Where MinLengthLogitsProcessor and MinNewTokensLengthLogitsProcessor stop suppressing EOS.
    s.eos_ids = *config.eos_token_id;
    s.eos_allowed_from = std::max(limits.min_length, s.prompt_length + config.min_new_tokens.value_or(0));
  }
  if (s.on_device && s.on_device->repetition_penalty != 1.f) {
    for (int64_t token : prompt) s.penalized.emplace(static_cast<int32_t>(token), 0);
  }
  states_.emplace(id, std::move(s));
}

void ModelRunner::remove_request(RequestId id) {
  states_.erase(id);
}

bool ModelRunner::can_run_ahead() const {
  return std::all_of(states_.begin(), states_.end(), [](const auto& entry) {
    const State& s = entry.second;
    return s.plain_greedy() || (s.on_device && !has_penalties(*s.on_device, s.options));
  });
}

int32_t ModelRunner::row_in_last_step(RequestId id) const {
  check(!queued_.empty(), "model runner: request ", id, " waits for a token no queued step chooses");
  const QueuedStep& last = queued_.back();
  const auto it = last.row_of.find(id);
  check(it != last.row_of.end() && last.chosen, "model runner: request ", id,
        " waits for a token the step queued last does not choose on the device");
  return it->second;
}

void ModelRunner::queue(const SchedulerOutput& plan) {
  check(!plan.chunks.empty(), "model runner: an empty plan");
  ForwardBatch batch;
  EarlierIds earlier;
  batch.query_start.push_back(0);
  for (const ScheduledChunk& c : plan.chunks)
    batch.max_blocks = std::max<int64_t>(batch.max_blocks, static_cast<int64_t>(c.blocks.size()));
  for (const ScheduledChunk& c : plan.chunks) {
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      const int64_t pos = c.start + static_cast<int64_t>(i);
      if (c.tokens[i] == kPendingToken) {
        earlier.rows.push_back(static_cast<int32_t>(batch.token_ids.size()));
        earlier.from.push_back(row_in_last_step(c.id));
      }
      batch.token_ids.push_back(c.tokens[i] == kPendingToken ? 0 : static_cast<int32_t>(c.tokens[i]));
      batch.positions.push_back(static_cast<int32_t>(pos));
      batch.slots.push_back(
          static_cast<int32_t>(c.blocks[static_cast<size_t>(pos / cache_.block_size)] * cache_.block_size +
                               pos % cache_.block_size));
    }
    if (c.sample) batch.logits_rows.push_back(static_cast<int32_t>(batch.token_ids.size() - 1));
    batch.query_start.push_back(static_cast<int32_t>(batch.token_ids.size()));
    batch.context_lens.push_back(static_cast<int32_t>(c.start + static_cast<int64_t>(c.tokens.size())));
    batch.block_tables.insert(batch.block_tables.end(), c.blocks.begin(), c.blocks.end());
    batch.block_tables.insert(batch.block_tables.end(),
                              static_cast<size_t>(batch.max_blocks) - c.blocks.size(), -1);
  }
  if (!earlier.rows.empty()) earlier.ids = &*queued_.back().chosen;
  QueuedStep step;
  std::vector<State*> sampled;
  for (const ScheduledChunk& c : plan.chunks) {
    if (!c.sample) continue;
    const auto it = states_.find(c.id);
    check(it != states_.end(), "model runner: request ", c.id, " was never added");
    sampled.push_back(&it->second);
    step.row_of.emplace(c.id, static_cast<int32_t>(step.ids.size()));
    step.ids.push_back(c.id);
    step.positions.push_back(c.start + static_cast<int64_t>(c.tokens.size()));
  }
  if (std::all_of(sampled.begin(), sampled.end(), [](const State* s) { return s->plain_greedy(); })) {
    // Greedy requests that need nothing of the logits but their argmax have it picked on the device.
    step.chosen = model_.queue_greedy(batch, cache_, earlier);
  } else if (std::all_of(sampled.begin(), sampled.end(),
                         [](const State* s) { return s->on_device.has_value(); })) {
    // Requests whose processors the device runs have their tokens chosen there.
    std::vector<RowSampling> rows;
    for (size_t row = 0; row < sampled.size(); ++row)
      rows.push_back(sampled[row]->device_settings(step.positions[row]));
    step.chosen = model_.queue_sample(batch, cache_, rows, earlier);
  } else {
    // Some request needs its logits on the host: those rows come back, the others are still chosen on the
    // device, and the step runs at once.
    check(queued_.empty(), "model runner: a step whose tokens the host chooses was queued behind another");
    std::vector<std::optional<RowSampling>> rows;
    for (size_t row = 0; row < sampled.size(); ++row) {
      State& s = *sampled[row];
      rows.push_back(s.on_device ? std::optional(s.device_settings(step.positions[row])) : std::nullopt);
    }
    CausalLM::SplitStep split = model_.split_step(batch, cache_, rows);
    const std::vector<int64_t> chosen = split.chosen ? split.chosen->read() : std::vector<int64_t>{};
    const int64_t V = split.host_logits.defined() ? split.host_logits.size(1) : 0;
    size_t on_device = 0, on_host = 0;
    for (size_t row = 0; row < sampled.size(); ++row) {
      State& s = *sampled[row];
      if (s.on_device) {
        step.done.push_back(accept(step.ids[row], step.positions[row], s, chosen[on_device++]));
        continue;
      }
      std::span<float> scores(split.host_logits.data<float>() + static_cast<int64_t>(on_host++) * V,
                              static_cast<size_t>(V));
      check_finite(s, s.removes_invalid_values || std::all_of(scores.begin(), scores.end(),
                                                              [](float x) { return std::isfinite(x); }));
      step.done.push_back(choose(step.ids[row], step.positions[row], s, scores));
    }
  }
  queued_.push_back(std::move(step));
}

std::vector<SampledToken> ModelRunner::collect() {
  check(!queued_.empty(), "model runner: no step is queued");
  QueuedStep step = std::move(queued_.front());
  queued_.pop_front();
  if (!step.chosen) return std::move(step.done);
  const std::vector<int64_t> tokens = step.chosen->read();
  std::vector<SampledToken> out;
  for (size_t row = 0; row < step.ids.size(); ++row) {
    const auto it = states_.find(step.ids[row]);
    if (it == states_.end()) continue;  // finished or cancelled while the step ran
    out.push_back(accept(step.ids[row], step.positions[row], it->second, tokens[row]));
  }
  return out;
}

SampledToken ModelRunner::accept(RequestId id, int64_t position, State& s, int64_t token) {
  check_finite(s, token >= 0);
  s.append(token);
  return {id, token, position, std::nullopt};
}

void ModelRunner::check_finite(const State& s, bool finite) const {
  const int64_t step = static_cast<int64_t>(s.tokens.size()) - s.prompt_length + 1;
  check(finite, "the logits of ", s.name, " at generation step ", step,
        " hold NaN or infinite values: the model's weights hold such values or its computation overflows in ",
        dtype_name(model_.dtype()), " (remove_invalid_values=True replaces them, as in Transformers)");
}

SampledToken ModelRunner::choose(RequestId id, int64_t position, State& s, std::span<float> scores) {
  const SamplingOptions& o = s.options;
  if (o.presence_penalty != 0 || o.frequency_penalty != 0) {
    std::map<int64_t, int64_t> counts;  // of the generated tokens, as OpenAI's penalties count them
    for (size_t i = static_cast<size_t>(s.prompt_length); i < s.tokens.size(); ++i) ++counts[s.tokens[i]];
    for (const auto& [token, n] : counts) {
      scores[static_cast<size_t>(token)] -=
          static_cast<float>(o.presence_penalty + o.frequency_penalty * static_cast<double>(n));
    }
  }
  s.processors(s.tokens, scores);
  SampledToken out{id, s.sampler ? s.sampler->sample(scores) : argmax(scores), position, std::nullopt};
  if (o.top_logprobs >= 0) {
    // Log probabilities of the distribution the token was chosen from, in float64.
    double max = -INFINITY;
    for (float x : scores) max = std::max(max, static_cast<double>(x));
    double sum = 0;
    for (float x : scores) sum += std::exp(static_cast<double>(x) - max);
    const double log_sum = max + std::log(sum);
    TokenLogprobs lp;
    lp.logprob = static_cast<double>(scores[static_cast<size_t>(out.token)]) - log_sum;
    std::vector<int64_t> order(scores.size());
    std::iota(order.begin(), order.end(), 0);
    const auto n = std::min<size_t>(static_cast<size_t>(o.top_logprobs), order.size());
    std::partial_sort(
        order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
        [&](int64_t a, int64_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); });
    for (size_t i = 0; i < n; ++i)
      lp.top.emplace_back(order[i], static_cast<double>(scores[order[i]]) - log_sum);
    out.logprobs = std::move(lp);
  }
  s.append(out.token);
  return out;
}

}  // namespace tfm

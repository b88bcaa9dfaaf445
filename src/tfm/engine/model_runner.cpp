#include "tfm/engine/model_runner.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "tfm/core/error.h"

namespace tfm {

ModelRunner::ModelRunner(CausalLM& model, KVCache& cache) : model_(model), cache_(cache) {}

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
  states_.emplace(id, std::move(s));
}

void ModelRunner::remove_request(RequestId id) {
  states_.erase(id);
}

std::vector<SampledToken> ModelRunner::run(const SchedulerOutput& plan) {
  if (plan.chunks.empty()) return {};
  ForwardBatch batch;
  batch.query_start.push_back(0);
  for (const ScheduledChunk& c : plan.chunks)
    batch.max_blocks = std::max<int64_t>(batch.max_blocks, static_cast<int64_t>(c.blocks.size()));
  for (const ScheduledChunk& c : plan.chunks) {
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      const int64_t pos = c.start + static_cast<int64_t>(i);
      batch.token_ids.push_back(static_cast<int32_t>(c.tokens[i]));
      batch.positions.push_back(static_cast<int32_t>(pos));
      batch.slots.push_back(
          static_cast<int32_t>(c.blocks[static_cast<size_t>(pos / cache_.block_size)] * cache_.block_size +
                               pos % cache_.block_size));
    }
    if (c.sample) batch.logits_rows.push_back(static_cast<int32_t>(batch.token_ids.size() - 1));
    batch.query_start.push_back(static_cast<int32_t>(batch.token_ids.size()));
    batch.context_lens.push_back(static_cast<int32_t>(c.start + static_cast<int64_t>(c.tokens.size())));
    batch.block_tables.insert(batch.block_tables.end(), c.blocks.begin(), c.blocks.end());
    batch.block_tables.insert(batch.block_tables.end(), static_cast<size_t>(batch.max_blocks) - c.blocks.size(), -1);
  }
  std::vector<State*> sampled;
  for (const ScheduledChunk& c : plan.chunks) {
    if (!c.sample) continue;
    const auto it = states_.find(c.id);
    check(it != states_.end(), "model runner: request ", c.id, " was never added");
    sampled.push_back(&it->second);
  }
  std::vector<SampledToken> out;
  // Greedy requests that need nothing of the logits but their argmax have it picked on the device.
  if (std::all_of(sampled.begin(), sampled.end(), [](const State* s) { return s->plain_greedy(); })) {
    const std::vector<int64_t> tokens = model_.greedy(batch, cache_);
    size_t row = 0;
    for (const ScheduledChunk& c : plan.chunks) {
      if (!c.sample) continue;
      check_finite(*sampled[row], tokens[row] >= 0);
      sampled[row]->tokens.push_back(tokens[row]);
      out.push_back({c.id, tokens[row], std::nullopt});
      ++row;
    }
    return out;
  }
  const Tensor logits = model_.forward(batch, cache_);
  const int64_t V = logits.size(1);
  int64_t row = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    if (!c.sample) continue;
    std::span<float> scores(logits.data<float>() + row * V, static_cast<size_t>(V));
    State& s = *sampled[static_cast<size_t>(row)];
    check_finite(s, s.removes_invalid_values ||
                        std::all_of(scores.begin(), scores.end(), [](float x) { return std::isfinite(x); }));
    out.push_back(choose(c.id, s, scores));
    ++row;
  }
  return out;
}

void ModelRunner::check_finite(const State& s, bool finite) const {
  const int64_t step = static_cast<int64_t>(s.tokens.size()) - s.prompt_length + 1;
  check(finite, "the logits of ", s.name, " at generation step ", step,
        " hold NaN or infinite values: the model's weights hold such values or its computation overflows in ",
        dtype_name(model_.dtype()), " (remove_invalid_values=True replaces them, as in Transformers)");
}

SampledToken ModelRunner::choose(RequestId id, State& s, std::span<float> scores) {
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
  SampledToken out{id, s.sampler ? s.sampler->sample(scores) : argmax(scores), std::nullopt};
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
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                      [&](int64_t a, int64_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); });
    for (size_t i = 0; i < n; ++i) lp.top.emplace_back(order[i], static_cast<double>(scores[order[i]]) - log_sum);
    out.logprobs = std::move(lp);
  }
  s.tokens.push_back(out.token);
  return out;
}

}  // namespace tfm

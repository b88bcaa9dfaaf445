#include "tfm/engine/engine.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/core/logging.h"

namespace tfm {

int64_t kv_cache_blocks(const CausalLM& model, const EngineConfig& config) {
  const ModelConfig& c = model.config();
  check(config.block_size > 0, "engine: block_size must be positive, got ", config.block_size);
  const int64_t context_blocks = blocks_for(std::max<int64_t>(c.max_position_embeddings, 1), config.block_size);
  const int64_t most_useful = config.scheduler.max_num_seqs * context_blocks;
  if (config.num_blocks) {
    check(*config.num_blocks > 0, "engine: num_blocks must be positive, got ", *config.num_blocks);
    return *config.num_blocks;
  }
  if (config.grow_cache) return 0;
  check(config.max_memory_percent > 0 && config.max_memory_percent <= 1,
        "engine: max_memory_percent must be in (0, 1], got ", config.max_memory_percent);
  const int64_t block_bytes = 2 * c.num_hidden_layers * config.block_size * c.num_key_value_heads * c.head_dim *
                              static_cast<int64_t>(dtype_size(model.dtype()));
  const Device d = model.device();
  const double free = static_cast<double>(find_backend(d.type)->info(d.index_or_zero()).free_memory);
  const auto fit = static_cast<int64_t>(free * config.max_memory_percent / static_cast<double>(block_bytes));
  check(fit > 0, "engine: ", d.str(), " has no memory left for a KV cache block of ", block_bytes, " bytes");
  return std::min(fit, most_useful);
}

namespace {

// EngineConfig::grow_cache's room ahead of each request, in tokens: most generations fit in the first
// allocation.
constexpr int64_t kGrowAhead = 256;

// EngineConfig::async_batching, decided for the model's device and logged once.
bool decide_async_batching(const CausalLM& model, std::optional<bool> asked) {
  const Device d = model.device();
  const bool on = asked.value_or(d.type != DeviceType::cpu);
  logging::log_once(logging::Level::info,
                    on ? "asynchronous batching on " + d.str() + ": each engine step is planned while the device "
                                                                 "runs the one before"
                       : "engine steps on " + d.str() + " run one after another (no asynchronous batching)");
  return on;
}

SchedulerConfig scheduler_config(const CausalLM& model, SchedulerConfig config) {
  // Dynamic RoPE recomputes its frequencies from the longest sequence of a step, so the keys of a block depend
  // on what else ran with it: no block can serve another request.
  if (model.config().rope.rope_type == "dynamic") config.prefix_caching = false;
  return config;
}

}  // namespace

Engine::Engine(CausalLM& model, GenerationConfig model_generation_config, EngineConfig config, DecodeFn decode)
    : model_(model),
      generation_config_(std::move(model_generation_config)),
      config_(config),
      decode_(std::move(decode)),
      cache_(model.make_cache(kv_cache_blocks(model, config), config.block_size)),
      scheduler_(scheduler_config(model, config.scheduler), cache_.pool, config.block_size,
                 config.grow_cache ? std::function<void(int64_t)>([this](int64_t wanted) { grow_cache(wanted); })
                                   : nullptr),
      runner_(model, cache_),
      async_(decide_async_batching(model, config.async_batching)) {}

Engine::~Engine() = default;

RequestId Engine::add_request(const std::vector<int64_t>& prompt, const RequestOptions& options) {
  const ModelConfig& c = model_.config();
  const PreparedGenerationConfig prepared = prepare_generation_config(generation_config_, options.generation);
  const GenerationConfig& g = prepared.config;
  check(g.num_beams.value_or(1) == 1, "beam search (num_beams > 1) is not supported");
  const RequestId id = next_id_;
  const std::string name = options.name.empty() ? "request " + std::to_string(id) : options.name;
  check(!prompt.empty(), name, " is empty");
  for (int64_t token : prompt) {
    check(token >= 0 && token < c.vocab_size, "token id ", token, " in ", name,
          " is outside the vocabulary (size ", c.vocab_size, ")");
  }
  const int64_t prompt_length = static_cast<int64_t>(prompt.size());
  const LengthLimits limits = resolve_length_limits(prepared, prompt_length, c.max_position_embeddings);
  Limits l;
  l.max_length = limits.max_length;
  l.max_blocks = blocks_for(std::max(limits.max_length, prompt_length + 1), config_.block_size);
  check(config_.grow_cache || l.max_blocks <= cache_.pool.num_blocks(), name, " needs up to ", limits.max_length,
        " tokens of KV cache (", l.max_blocks, " blocks of ", config_.block_size, "), but the cache holds ",
        cache_.pool.num_blocks(), " blocks");
  const uint64_t seed = g.seed ? *g.seed : std::random_device{}();
  runner_.add_request(id, name, prompt, g, limits, options.sampling, seed, options.stream);
  l.stopping = std::make_unique<StoppingCriteria>(g, limits.max_length, decode_, c.max_position_embeddings);
  limits_.emplace(id, std::move(l));
  ++next_id_;
  Request r;
  r.id = id;
  r.tokens = prompt;
  r.prompt_length = prompt_length;
  r.priority = options.priority;
  scheduler_.add(std::move(r));
  return id;
}

void Engine::cancel(RequestId id) {
  scheduler_.finish(id);
  runner_.remove_request(id);
  limits_.erase(id);
}

std::vector<RequestOutput> Engine::step() {
  const bool ahead = async_ && runner_.can_run_ahead();
  // A request needs the tokens of the step in flight on the host before its next step is queued.
  if (!ahead && runner_.queued() > 0) return deliver(runner_.collect());
  const SchedulerOutput plan = scheduler_.schedule();
  if (!plan.chunks.empty()) {
    runner_.queue(plan);
    scheduler_.update(plan);
    ++steps_;
  }
  // Asynchronously, the step before this one is read while the device runs this one.
  const size_t keep_queued = ahead && !plan.chunks.empty() ? 1 : 0;
  if (runner_.queued() <= keep_queued) return {};
  std::vector<RequestOutput> out = deliver(runner_.collect());
  // The step still queued computes only for requests that finished: nothing is left to run after it.
  if (!scheduler_.has_unfinished() && runner_.queued() > 0) runner_.collect();
  return out;
}

std::vector<RequestOutput> Engine::deliver(const std::vector<SampledToken>& sampled) {
  std::vector<RequestOutput> out;
  for (const SampledToken& s : sampled) {
    scheduler_.resolve(s.id, s.position, s.token);
    RequestOutput o;
    o.id = s.id;
    o.new_tokens = {s.token};
    if (s.logprobs) o.logprobs = {*s.logprobs};
    ++generated_tokens_;
    // Up to this token: the request may hold the pending token of the step after it.
    const std::vector<int64_t>& tokens = scheduler_.find(s.id)->tokens;
    o.stop = limits_.at(s.id).stopping->check(std::span(tokens).first(static_cast<size_t>(s.position) + 1));
    if (o.stop != StopReason::none) {
      o.finished = true;
      cancel(s.id);
    }
    out.push_back(std::move(o));
  }
  return out;
}

void Engine::grow_cache(int64_t wanted) {
  // Doubling keeps the copying of a growing cache linear in its size; no request ever needs more blocks than
  // its length limit's, so neither does the step.
  int64_t ahead = 0, most = 0;
  for (const auto& [id, l] : limits_) {
    const auto tokens = static_cast<int64_t>(scheduler_.find(id)->tokens.size());
    ahead += std::min(l.max_blocks, blocks_for(tokens + kGrowAhead, config_.block_size));
    if (__builtin_add_overflow(most, l.max_blocks, &most)) most = std::numeric_limits<int64_t>::max();
  }
  const int64_t blocks = cache_.pool.num_blocks();
  const int64_t used = blocks - cache_.pool.num_free();
  cache_.reserve(std::min(std::max({ahead, 2 * blocks, used + wanted}), most));
}

EngineStats Engine::stats() const {
  EngineStats s;
  static_cast<SchedulerStats&>(s) = scheduler_.stats();
  s.num_blocks = cache_.pool.num_blocks();
  s.block_size = config_.block_size;
  s.generated_tokens = generated_tokens_;
  s.steps = steps_;
  return s;
}

}  // namespace tfm

#include "tfm/generate/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>

#include "tfm/core/error.h"
#include "tfm/generate/logits_process.h"
#include "tfm/generate/sampling.h"

namespace tfm {
namespace {

struct Sequence {
  std::vector<int64_t> ids;      // prompt + generated, as Transformers' input_ids
  std::vector<int64_t> pending;  // tokens not yet in the cache
  size_t prompt_length = 0;
  SequenceCache cache;
  LogitsProcessorList processors;
  std::unique_ptr<StoppingCriteria> stopping;
  std::unique_ptr<Sampler> sampler;
  StopReason stop = StopReason::none;
  int64_t max_blocks = 0;  // cache blocks at its length limit
};

// Tokens past its prompt that a sequence's first cache blocks hold: most generations fit in the first
// allocation; longer ones grow the cache.
constexpr int64_t kFirstReserve = 256;

}  // namespace

GenerationConfig load_generation_config(const std::string& dir, const ModelConfig& config) {
  const std::filesystem::path path = std::filesystem::path(dir) / "generation_config.json";
  if (std::filesystem::exists(path)) return GenerationConfig::from_file(path.string());
  GenerationConfig g;
  g.bos_token_id = config.bos_token_id;
  if (!config.eos_token_id.empty()) g.eos_token_id = config.eos_token_id;
  g.pad_token_id = config.pad_token_id;
  return g;
}

GenerateOutput generate(CausalLM& model, const std::vector<std::vector<int64_t>>& prompts,
                        const GenerationConfig& model_config, const json::Object& kwargs,
                        const GenerateCallbacks& callbacks) {
  GenerateOutput out;
  if (prompts.empty()) return out;
  const PreparedGenerationConfig prepared = prepare_generation_config(model_config, kwargs);
  const GenerationConfig& config = prepared.config;
  check(config.num_beams.value_or(1) == 1, "beam search (num_beams > 1) is not supported");
  const bool sample = config.do_sample.value_or(false);
  const uint64_t seed = config.seed ? *config.seed : std::random_device{}();

  const int64_t max_position_embeddings = model.config().max_position_embeddings;
  std::vector<Sequence> seqs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    Sequence& s = seqs[i];
    check(!prompts[i].empty(), "prompt ", i, " is empty");
    for (int64_t id : prompts[i]) {
      check(id >= 0 && id < model.config().vocab_size, "token id ", id, " in prompt ", i,
            " is outside the vocabulary (size ", model.config().vocab_size, ")");
    }
    s.ids = s.pending = prompts[i];
    s.prompt_length = prompts[i].size();
    const int64_t prompt_length = static_cast<int64_t>(s.prompt_length);
    const LengthLimits limits = resolve_length_limits(prepared, prompt_length, max_position_embeddings);
    s.processors = build_logits_processors(config, prompt_length, limits);
    s.stopping = std::make_unique<StoppingCriteria>(config, limits.max_length, callbacks.decode,
                                                    max_position_embeddings);
    if (sample) s.sampler = std::make_unique<Sampler>(seed, i);
    s.max_blocks = blocks_for(limits.max_length, CausalLM::kDefaultBlockSize);
    out.prompt_tokens += prompt_length;
  }
  // The cache grows with the sequences (reserve keeps what it holds): a large max_new_tokens costs memory
  // only as far as generation really goes.
  int64_t first_blocks = 0;
  for (const Sequence& s : seqs) {
    first_blocks += std::min(s.max_blocks, blocks_for(static_cast<int64_t>(s.prompt_length) + kFirstReserve,
                                                      CausalLM::kDefaultBlockSize));
  }
  KVCache cache = model.make_cache(first_blocks);

  bool first_step = true;
  while (true) {
    std::vector<size_t> active;
    int64_t wanted = 0, most = 0;  // blocks this step adds, and all the active sequences can ever hold
    for (size_t i = 0; i < seqs.size(); ++i) {
      const Sequence& s = seqs[i];
      if (s.stop != StopReason::none) continue;
      active.push_back(i);
      const int64_t tokens = s.cache.num_cached + static_cast<int64_t>(s.pending.size());
      wanted += blocks_for(tokens, cache.block_size) - static_cast<int64_t>(s.cache.blocks.size());
      if (__builtin_add_overflow(most, s.max_blocks, &most)) most = std::numeric_limits<int64_t>::max();
    }
    if (active.empty()) break;
    if (wanted > cache.pool.num_free()) {
      // Doubling keeps the copying of a growing cache linear in its size.
      const int64_t used = cache.pool.num_blocks() - cache.pool.num_free();
      cache.reserve(std::min(std::max(2 * int64_t{cache.pool.num_blocks()}, used + wanted), most));
    }
    BatchBuilder builder(cache);
    for (size_t i : active) builder.add(seqs[i].cache, seqs[i].pending, Logits::last);
    const auto start = std::chrono::steady_clock::now();
    const ForwardBatch batch = builder.finish();
    // Greedy rows without processors need only their argmax, which the device picks; others read the logits.
    const bool plain_greedy = std::all_of(active.begin(), active.end(),
                                          [&](size_t i) { return !seqs[i].sampler && seqs[i].processors.empty(); });
    std::vector<int64_t> greedy;
    Tensor logits;
    if (plain_greedy) {
      greedy = model.greedy(batch, cache);
    } else {
      logits = model.forward(batch, cache);
    }
    for (size_t row = 0; row < active.size(); ++row) {
      Sequence& s = seqs[active[row]];
      int64_t token = 0;
      // Transformers' greedy search would pick a token from NaN scores all the same; an error says why the text
      // is nonsense instead.
      auto check_finite = [&](bool finite) {
        check(finite, "the logits of prompt ", active[row], " at generation step ", s.ids.size() - s.prompt_length + 1,
              " hold NaN or infinite values: the model's weights hold such values or its computation overflows "
              "in ",
              dtype_name(model.dtype()), " (remove_invalid_values=True replaces them, as in Transformers)");
      };
      if (plain_greedy) {
        token = greedy[row];
        check_finite(token >= 0);
      } else {
        const int64_t V = logits.size(1);
        std::span<float> scores(logits.data<float>() + static_cast<int64_t>(row) * V, static_cast<size_t>(V));
        check_finite(config.remove_invalid_values == true ||
                     std::all_of(scores.begin(), scores.end(), [](float x) { return std::isfinite(x); }));
        s.processors(s.ids, scores);
        token = s.sampler ? s.sampler->sample(scores) : argmax(scores);
      }
      s.ids.push_back(token);
      s.pending = {token};
      ++out.generated_tokens;
      if (callbacks.on_token) callbacks.on_token(active[row], token);
      s.stop = s.stopping->check(s.ids);
      if (s.stop != StopReason::none) release(s.cache, cache);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    (first_step ? out.prefill_seconds : out.decode_seconds) += seconds;
    first_step = false;
  }
  for (Sequence& s : seqs) {
    out.tokens.emplace_back(s.ids.begin() + static_cast<std::ptrdiff_t>(s.prompt_length), s.ids.end());
    out.stop_reasons.push_back(s.stop);
  }
  return out;
}

}  // namespace tfm

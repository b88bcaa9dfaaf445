#include "tfm/generate/generate.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>

#include "tfm/engine/engine.h"

namespace tfm {

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
  for (const std::vector<int64_t>& p : prompts) out.prompt_tokens += static_cast<int64_t>(p.size());
  // The first step runs every prompt whole, each later one a token of every unfinished sequence: the budget
  // is all the prompts, and the cache grows with the sequences (a huge max_new_tokens is a limit, not a
  // reservation), so nothing waits, is chunked or preempted.
  EngineConfig config;
  config.scheduler.max_batch_tokens = std::max<int64_t>(out.prompt_tokens, 1);
  config.scheduler.max_num_seqs = static_cast<int64_t>(prompts.size());
  config.block_size = CausalLM::kDefaultBlockSize;
  config.grow_cache = true;
  Engine engine(model, model_config, config, callbacks.decode);
  std::map<RequestId, size_t> index;  // of each request's prompt
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestOptions options;
    options.generation = kwargs;
    options.stream = i;  // a shared seed draws per prompt, as before the engine
    options.name = "prompt " + std::to_string(i);
    index.emplace(engine.add_request(prompts[i], options), i);
  }
  out.tokens.resize(prompts.size());
  out.stop_reasons.resize(prompts.size(), StopReason::none);
  while (engine.has_unfinished()) {
    // Prefill lasts until the first tokens come out: with asynchronous batching the first step only queues.
    const bool prefill = out.generated_tokens == 0;
    const auto start = std::chrono::steady_clock::now();
    for (const RequestOutput& o : engine.step()) {
      const size_t i = index.at(o.id);
      for (int64_t token : o.new_tokens) {
        out.tokens[i].push_back(token);
        ++out.generated_tokens;
        if (callbacks.on_token) callbacks.on_token(i, token);
      }
      if (o.finished) out.stop_reasons[i] = o.stop;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    (prefill ? out.prefill_seconds : out.decode_seconds) += seconds;
  }
  return out;
}

}  // namespace tfm

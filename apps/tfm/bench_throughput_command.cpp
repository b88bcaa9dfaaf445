#include <chrono>
#include <iomanip>
#include <iostream>
#include <optional>
#include <random>

#include "commands.h"
#include "model_args.h"
#include "tfm/core/error.h"
#include "tfm/engine/engine.h"
#include "tfm/io/json.h"

namespace tfm::cli {
namespace {

int run(Args& args) {
  ModelArgs m = read_model_args(args);
  const int64_t num_prompts = args.get_int("num-prompts", 256);
  const int64_t input_len = args.get_int("input-len", 128);
  const int64_t output_len = args.get_int("output-len", 256);
  const SchedulerConfig defaults;
  const int64_t max_batch_tokens = args.get_int("max-batch-tokens", defaults.max_batch_tokens);
  const int64_t max_num_seqs = args.get_int("max-num-seqs", defaults.max_num_seqs);
  const std::optional<bool> async_batching = args.toggle("async-batching");
  const bool as_json = args.flag("json");
  args.finish();
  check(num_prompts > 0 && input_len > 0 && output_len > 0,
        "--num-prompts, --input-len and --output-len must be positive");

  if (!m.options.device_map || *m.options.device_map == "auto") m.options.device_map = "auto";
  AutoModelForCausalLM model = AutoModelForCausalLM::from_pretrained(m.dir, m.options);
  EngineConfig config;
  config.scheduler.max_batch_tokens = max_batch_tokens;
  config.scheduler.max_num_seqs = max_num_seqs;
  config.async_batching = async_batching;
  Engine engine(model.model(), model.generation_config(), config);

  // Random prompts (a fixed seed: the same workload every run), every request generating exactly output_len
  // tokens, greedy. No EOS at all (eos_token_id None, as generate(eos_token_id=None)) rather than
  // min_new_tokens, whose processor would send every step's logits to the host.
  std::mt19937_64 rng(0);
  const int64_t vocab = model.model().config().vocab_size;
  RequestOptions options;
  options.generation = {{"max_new_tokens", output_len}, {"eos_token_id", nullptr}, {"do_sample", false}};
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < num_prompts; ++i) {
    std::vector<int64_t> prompt(static_cast<size_t>(input_len));
    for (int64_t& t : prompt) t = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
    engine.add_request(prompt, options);
  }
  int64_t generated = 0;
  while (engine.has_unfinished()) generated += static_cast<int64_t>(engine.step().size());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const EngineStats st = engine.stats();

  json::Value out;
  out.set("device", model.device().str());
  out.set("dtype", std::string(dtype_name(model.model().dtype())));
  out.set("num_prompts", num_prompts);
  out.set("input_len", input_len);
  out.set("output_len", output_len);
  out.set("seconds", seconds);
  out.set("requests_per_s", static_cast<double>(num_prompts) / seconds);
  out.set("output_tokens_per_s", static_cast<double>(generated) / seconds);
  out.set("total_tokens_per_s", static_cast<double>(generated + num_prompts * input_len) / seconds);
  out.set("async_batching", engine.async_batching());
  out.set("steps", st.steps);
  out.set("preemptions", st.preemptions);
  out.set("kv_blocks", st.num_blocks);
  if (as_json) {
    std::cout << json::dump(out) << "\n";
    return 0;
  }
  std::cout << std::fixed << std::setprecision(1) << num_prompts << " requests of " << input_len << " + "
            << output_len << " tokens in " << seconds << " s: " << static_cast<double>(generated) / seconds
            << " output tokens/s, " << static_cast<double>(num_prompts) / seconds << " requests/s (" << st.steps
            << " steps, " << st.preemptions << " preemptions, " << st.num_blocks << " KV blocks, asynchronous batching "
            << (engine.async_batching() ? "on" : "off") << ")\n";
  return 0;
}

}  // namespace

const Command kBenchThroughputCommand{
    "bench throughput", "offline throughput of the continuous batching engine",
    "usage: tfm bench throughput [--model ID|DIR] [--num-prompts 256] [--input-len 128] [--output-len 256]\n"
    "                            [--max-batch-tokens 8192] [--max-num-seqs 1024] [--[no-]async-batching]\n"
    "                            [--json] [model options]\n\n"
    "Submits --num-prompts requests of --input-len random tokens at once, each generating exactly "
    "--output-len\n"
    "tokens greedily, runs the engine until all finish, and prints output tokens/s, total tokens/s and\n"
    "requests/s (--json: one object). --async-batching and --no-async-batching force the engine's\n"
    "asynchronous batching on or off (default: on for cuda and xpu, off on the cpu).\n\n" +
        std::string(kModelHelp) + kRunHelp,
    run};

}  // namespace tfm::cli

// `tfm bench latency`: one batch of random prompts, prefill and decode timed apart after a warm-up, and decode
// against the memory-bandwidth floor: the bytes a step must read (every weight, and the KV cache so far) over the
// device's copy bandwidth, which the command measures itself.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <random>

#include "commands.h"
#include "model_args.h"
#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/core/floats.h"
#include "tfm/generation/generation_config.h"
#include "tfm/io/json.h"
#include "tfm/model/causal_lm.h"

namespace tfm::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Bytes per second of a device-to-device copy (each byte read once and written once, both counted), the best
// of a few copies of 256 MB after one that is not timed.
double copy_bandwidth(Device device) {
  Backend& backend = *find_backend(device.type);
  const int index = device.index_or_zero();
  const int64_t bytes = int64_t{256} << 20;
  const Tensor src = empty({bytes}, DType::uint8, device), dst = empty({bytes}, DType::uint8, device);
  double best = 0;
  for (int i = 0; i < 6; ++i) {
    backend.synchronize(index);
    const auto start = Clock::now();
    backend.copy_on_device(index, DeviceSpan(dst.raw()), DeviceSpan(src.raw()), static_cast<size_t>(bytes));
    backend.synchronize(index);
    if (i > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / seconds_since(start));
  }
  return best;
}

struct Timing {
  double prefill_seconds = 0, decode_seconds = 0;
};

// The sampling of --do-sample: the model folder's generation_config.json where it sets temperature, top_k,
// top_p or min_p, else Transformers' defaults (1, 50, 1, none).
RowSampling sampling_of(const std::string& dir) {
  const std::filesystem::path file = std::filesystem::path(dir) / "generation_config.json";
  const GenerationConfig c =
      std::filesystem::exists(file) ? GenerationConfig::from_file(file.string()) : GenerationConfig{};
  RowSampling r;
  r.temperature = static_cast<float>(c.temperature.value_or(1.0));
  r.top_k = c.top_k.value_or(50);
  r.top_p = static_cast<float>(c.top_p.value_or(1.0));
  r.min_p = static_cast<float>(c.min_p.value_or(0.0));
  return r;
}

// Prefill of every prompt in one step, then `steps` decode steps of the whole batch: greedy, or sampled by
// `sampling` on the device.
Timing run_batch(CausalLM& model, KVCache& cache, const std::vector<std::vector<int64_t>>& prompts,
                 int64_t steps, const std::optional<RowSampling>& sampling) {
  std::vector<SequenceCache> seqs(prompts.size());
  std::vector<std::vector<int64_t>> next = prompts;
  std::vector<RowSampling> rows(prompts.size(), sampling.value_or(RowSampling{}));
  Timing t;
  for (int64_t step = 0; step <= steps; ++step) {
    const auto start = Clock::now();
    BatchBuilder builder(cache);
    for (size_t i = 0; i < seqs.size(); ++i) builder.add(seqs[i], next[i], Logits::last);
    for (size_t i = 0; i < rows.size(); ++i) rows[i].key = static_cast<uint64_t>(step * 4096) + i;
    const std::vector<int64_t> tokens =
        sampling ? model.sample(builder.finish(), cache, rows) : model.greedy(builder.finish(), cache);
    for (size_t i = 0; i < seqs.size(); ++i) next[i] = {tokens[i]};
    (step == 0 ? t.prefill_seconds : t.decode_seconds) += seconds_since(start);
  }
  for (SequenceCache& s : seqs) release(s, cache);
  return t;
}

int run(Args& args) {
  ModelArgs m = read_model_args(args);
  const int64_t batch = args.get_int("batch-size", 1);
  const int64_t input_len = args.get_int("input-len", 128);
  const int64_t output_len = args.get_int("output-len", 128);
  const int64_t repeat = args.get_int("repeat", 3);
  m.options.device_graphs = !args.flag("no-device-graphs");
  const std::optional<RowSampling> sampling =
      args.flag("do-sample") ? std::optional<RowSampling>(sampling_of(m.dir)) : std::nullopt;
  const bool as_json = args.flag("json");
  args.finish();
  check(batch >= 1 && batch <= 4096, "--batch-size must be between 1 and 4096, got ", batch);
  check(input_len >= 1 && output_len >= 1 && repeat >= 1, "--input-len, --output-len and --repeat must be positive");

  CausalLM model = std::move(AutoModelForCausalLM::from_pretrained(m.dir, m.options).model());
  const ModelConfig& c = model.config();
  check(input_len + output_len <= c.max_position_embeddings, "--input-len + --output-len (", input_len + output_len,
        ") is over the model's context (", c.max_position_embeddings, ")");
  std::mt19937 rng(0);
  std::uniform_int_distribution<int64_t> token(0, std::min<int64_t>(c.vocab_size, 32000) - 1);
  std::vector<std::vector<int64_t>> prompts(static_cast<size_t>(batch));
  for (auto& p : prompts)
    for (int64_t i = 0; i < input_len; ++i) p.push_back(token(rng));
  const int64_t block = CausalLM::kDefaultBlockSize;
  KVCache cache = model.make_cache(batch * blocks_for(input_len + output_len + 1, block), block);

  run_batch(model, cache, prompts, std::min<int64_t>(output_len, 8), sampling);  // warm-up: plans, graphs
  std::vector<Timing> runs;
  for (int64_t r = 0; r < repeat; ++r) runs.push_back(run_batch(model, cache, prompts, output_len, sampling));
  auto median = [&](double Timing::*field) {
    std::vector<double> v;
    for (const Timing& t : runs) v.push_back(t.*field);
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  const double prefill = median(&Timing::prefill_seconds), decode = median(&Timing::decode_seconds);

  // A decode step reads every weight once, but of an embedding table not tied to the head only its sequences'
  // rows, and, per sequence, the keys and values of its context (on average the prompt and half of the new
  // tokens).
  const double bandwidth = copy_bandwidth(model.device());
  const double element = static_cast<double>(dtype_size(model.dtype()));
  const double kv_bytes_per_token =
      2.0 * static_cast<double>(c.num_hidden_layers * c.num_key_value_heads * c.head_dim) * element;
  const double unread_embedding =
      c.tie_word_embeddings ? 0.0
                            : static_cast<double>(c.vocab_size - batch) * static_cast<double>(c.hidden_size) * element;
  const double step_bytes = static_cast<double>(model.weight_bytes()) - unread_embedding +
                            static_cast<double>(batch) * (static_cast<double>(input_len) + static_cast<double>(output_len) / 2) *
                                kv_bytes_per_token;
  const double step_seconds = decode / static_cast<double>(output_len);
  const double floor_seconds = step_bytes / bandwidth;
  const double prefill_tps = static_cast<double>(batch * input_len) / prefill;
  const double decode_tps = static_cast<double>(batch * output_len) / decode;

  if (as_json) {
    json::Value out;
    out.set("model", m.id);
    out.set("device", model.device().str());
    out.set("dtype", std::string(dtype_name(model.dtype())));
    out.set("batch_size", batch);
    out.set("input_len", input_len);
    out.set("output_len", output_len);
    out.set("device_graphs", model.device_graphs());
    out.set("do_sample", sampling.has_value());
    out.set("prefill_seconds", prefill);
    out.set("prefill_tokens_per_s", prefill_tps);
    out.set("decode_seconds", decode);
    out.set("decode_tokens_per_s", decode_tps);
    out.set("decode_step_ms", step_seconds * 1e3);
    out.set("copy_bandwidth_gb_s", bandwidth / 1e9);
    out.set("decode_step_bytes", step_bytes);
    out.set("decode_floor_step_ms", floor_seconds * 1e3);
    out.set("fraction_of_floor", floor_seconds / step_seconds);
    std::cout << json::dump(out) << "\n";
  } else {
    std::cout << m.id << " on " << model.device().str() << " in " << dtype_name(model.dtype()) << ", batch "
              << batch << ", " << input_len << " prompt + " << output_len << " new tokens, "
              << (sampling ? "sampled" : "greedy") << " (median of " << repeat << ")\n"
              << "prefill: " << prefill_tps << " tokens/s (" << prefill * 1e3 << " ms)\n"
              << "decode:  " << decode_tps << " tokens/s (" << step_seconds * 1e3 << " ms a step)\n"
              << "floor:   " << floor_seconds * 1e3 << " ms a step (" << step_bytes / 1e6 << " MB at "
              << bandwidth / 1e9 << " GB/s copy bandwidth): decode at " << 100 * floor_seconds / step_seconds
              << "% of it\n";
  }
  return 0;
}

}  // namespace

const Command kBenchLatencyCommand{
    "bench latency", "time prefill and decode of one batch, against the bandwidth floor",
    "usage: tfm bench latency [--model ID|DIR] [--batch-size B] [--input-len L] [--output-len N]\n"
    "                         [--do-sample] [--json]\n\n"
    "Loads the model, warms up, then times one prefill of B random prompts of L tokens and N decode\n"
    "steps of the batch (the median of --repeat runs), greedy or sampled. Decode is compared with its\n"
    "floor: the bytes a step reads (the weights, and the KV cache of the average context) over the\n"
    "device's copy bandwidth, measured here.\n\n"
    "options:\n"
    "  --batch-size B              sequences decoded together (default 1)\n"
    "  --input-len L               prompt tokens of each (default 128)\n"
    "  --output-len N              new tokens of each (default 128)\n"
    "  --repeat R                  timed runs (default 3)\n"
    "  --no-device-graphs          run decode steps kernel by kernel\n"
    "  --do-sample                 sample on the device with the model's generation_config.json\n"
    "                              (temperature, top_k, top_p, min_p; Transformers' defaults 1, 50, 1\n"
    "                              where it has none)\n"
    "  --json                      print one JSON object\n" +
        std::string(kModelHelp) + kRunHelp,
    run};

}  // namespace tfm::cli

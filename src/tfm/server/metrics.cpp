#include "tfm/server/metrics.h"

#include <algorithm>

#include "tfm/io/json.h"

namespace tfm::server {
namespace {

std::string number(double x) {
  return json::python_float_repr(x);  // Prometheus reads what Go's ParseFloat reads: "0.25", "1e-05"
}

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void sample(std::string& out, std::string_view name, const std::string& value, std::string_view labels = {}) {
  out.append(name).append(labels).append(" ").append(value).append("\n");
}

void gauge(std::string& out, std::string_view name, std::string_view help, const std::string& value) {
  header(out, name, "gauge", help);
  sample(out, name, value);
}

void counter(std::string& out, std::string_view name, std::string_view help, int64_t value) {
  header(out, name, "counter", help);
  sample(out, name, std::to_string(value));
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[static_cast<size_t>(bucket)];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, std::string_view name, std::string_view help) const {
  header(out, name, "histogram", help);
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    sample(out, bucket, std::to_string(cumulative), "{le=\"" + number(bounds_[i]) + "\"}");
  }
  sample(out, bucket, std::to_string(count_), "{le=\"+Inf\"}");
  sample(out, std::string(name) + "_sum", number(sum_));
  sample(out, std::string(name) + "_count", std::to_string(count_));
}

std::string render_metrics(const EngineStats& engine, const ServingMetrics& serving) {
  std::string out;
  gauge(out, "tfm_requests_waiting", "Requests waiting for their first step.",
        std::to_string(engine.waiting));
  gauge(out, "tfm_requests_running", "Requests being computed.", std::to_string(engine.running));
  gauge(out, "tfm_kv_cache_blocks_used", "KV cache blocks held by requests or the prefix cache.",
        std::to_string(engine.blocks_used));
  gauge(out, "tfm_kv_cache_blocks_free", "KV cache blocks free.", std::to_string(engine.blocks_free));
  gauge(out, "tfm_kv_cache_block_size", "Tokens per KV cache block.", std::to_string(engine.block_size));
  counter(out, "tfm_prefix_cache_queries_total", "Prompt blocks looked up in the prefix cache.",
          engine.prefix_queries);
  counter(out, "tfm_prefix_cache_hits_total", "Prompt blocks found in the prefix cache.", engine.prefix_hits);
  gauge(out, "tfm_prefix_cache_hit_rate", "Prefix cache hits per query since the start.",
        number(engine.prefix_queries
                   ? static_cast<double>(engine.prefix_hits) / static_cast<double>(engine.prefix_queries)
                   : 0.0));
  counter(out, "tfm_preemptions_total", "Requests preempted because the KV cache ran out.",
          engine.preemptions);
  counter(out, "tfm_engine_steps_total", "Forward steps run.", engine.steps);
  counter(out, "tfm_prompt_tokens_total", "Prompt tokens of the requests accepted.", serving.prompt_tokens);
  counter(out, "tfm_generation_tokens_total", "Tokens generated.", engine.generated_tokens);
  header(out, "tfm_requests_finished_total", "counter",
         "Requests (one per choice) finished, by how they ended.");
  for (const auto& [reason, n] : serving.finished) {
    sample(out, "tfm_requests_finished_total", std::to_string(n), "{finish_reason=\"" + reason + "\"}");
  }
  serving.time_to_first_token.render(out, "tfm_time_to_first_token_seconds",
                                     "Time from a request's arrival to its first generated token.");
  serving.inter_token_latency.render(out, "tfm_inter_token_latency_seconds",
                                     "Time between consecutive generated tokens of a request.");
  return out;
}

}  // namespace tfm::server

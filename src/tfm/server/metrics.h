// What /metrics reports, in Prometheus' text format (version 0.0.4): the engine's queue and KV cache, the
// prefix cache, token counts, and latency histograms.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/engine/engine.h"

namespace tfm::server {

// A Prometheus histogram: counts of observations at or below each bound, their sum and number.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  void render(std::string& out, std::string_view name, std::string_view help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), the last one above every bound
  double sum_ = 0;
  uint64_t count_ = 0;
};

// What the completion service measures itself (the engine counts the rest).
struct ServingMetrics {
  Histogram time_to_first_token{
      {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}};
  Histogram inter_token_latency{{0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
                                 0.1,   0.15,   0.2,   0.3,  0.4,   0.5,  0.75,  1,    2.5,  5}};
  int64_t prompt_tokens = 0;
  std::map<std::string, int64_t> finished;  // engine requests by how they ended: stop, length, abort, error
};

std::string render_metrics(const EngineStats& engine, const ServingMetrics& serving);

}  // namespace tfm::server

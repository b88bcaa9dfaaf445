// op::SampleRows on the CPU: each rule of op_set.h applied to a float32 copy of the row, in its order, as
// plainly as it reads; the reference the devices' kernels are tested against, and what the host runs for a
// device without them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "tfm/backend/cpu/cpu_backend.h"
#include "tfm/backend/sampling_math.h"
#include "tfm/core/floats.h"
#include "tfm/core/parallel.h"

namespace tfm::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

SampleSettings settings_of(const op::SampleRows& a, int64_t r) {
  SampleSettings s;
  std::memcpy(&s, a.settings.data<int32_t>() + r * kSampleSettingsWords, sizeof s);
  return s;
}

// The penalties of step 1 on the row's values.
void penalize(std::vector<float>& x, const SampleSettings& s, const op::SampleRows& a) {
  const int64_t N = a.penalties.size(0), V = static_cast<int64_t>(x.size());
  const int32_t* entries = a.penalties.data<int32_t>();
  for (int64_t j = std::max<int64_t>(s.penalties_begin, 0); j < std::min<int64_t>(s.penalties_end, N); ++j) {
    const int32_t token = entries[2 * j];
    if (token < 0 || token >= V) continue;
    float amount;
    std::memcpy(&amount, &entries[2 * j + 1], sizeof amount);
    float v = x[static_cast<size_t>(token)] - amount;
    if (s.repetition_penalty != 1.f) v = v < 0 ? v * s.repetition_penalty : v / s.repetition_penalty;
    x[static_cast<size_t>(token)] = v;
  }
}

// Top-p's cut: the largest kept value whose kept tokens at or above it weigh at least `target`, or the
// smallest kept value when none does (the float32 product that made target rounded past the total).
float top_p_cut(const std::vector<float>& y, const std::vector<bool>& kept, const std::vector<uint64_t>& mass,
                uint64_t target) {
  std::vector<size_t> order;
  for (size_t i = 0; i < y.size(); ++i) {
    if (kept[i]) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return y[a] > y[b]; });
  uint64_t above = 0;
  for (size_t i : order) {
    above += mass[i];
    if (above >= target) return y[i];
  }
  return y[order.back()];
}

int32_t sample_row(std::vector<float>& x, const SampleSettings& s, const op::SampleRows& a) {
  penalize(x, s, a);
  const bool greedy = s.temperature <= 0;
  if (!greedy) {
    for (float& v : x) v /= s.temperature;
  }
  const std::vector<float>& y = x;
  float max = kNegInf;
  size_t first_max = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (std::isnan(y[i]) || y[i] == -kNegInf) return -1;
    if (y[i] > max) {
      max = y[i];
      first_max = i;
    }
  }
  if (max == kNegInf) return -1;
  if (greedy) return static_cast<int32_t>(first_max);

  const int64_t V = static_cast<int64_t>(y.size());
  std::vector<bool> kept(y.size());
  for (size_t i = 0; i < y.size(); ++i) kept[i] = y[i] != kNegInf;
  auto drop_below = [&](float threshold) {
    for (size_t i = 0; i < y.size(); ++i) kept[i] = kept[i] && y[i] >= threshold;
  };
  if (s.top_k > 0 && s.top_k < V) {
    // Ranked over the whole row, -inf values too, as torch.topk ranks them.
    std::vector<float> ranked = y;
    const auto kth = ranked.begin() + (s.top_k - 1);
    std::nth_element(ranked.begin(), kth, ranked.end(), std::greater<float>());
    drop_below(*kth);
  }
  if (s.top_p < 1) {
    std::vector<uint64_t> mass(y.size(), 0);
    uint64_t total = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      if (kept[i]) total += mass[i] = fixed_mass(std::exp(y[i] - max));
    }
    const auto target = static_cast<uint64_t>(s.top_p * static_cast<float>(total));
    drop_below(top_p_cut(y, kept, mass, target));
  }
  if (s.min_p > 0) {
    for (size_t i = 0; i < y.size(); ++i) kept[i] = kept[i] && std::exp(y[i] - max) >= s.min_p;
  }
  const uint64_t key = uint64_t{s.key_high} << 32 | s.key_low;
  return static_cast<int32_t>(
      race_winner(y.data(), V, key, [&](int64_t i) { return kept[static_cast<size_t>(i)]; }));
}

template <typename T>
void sample_rows(const op::SampleRows& a) {
  const int64_t R = a.logits.size(0), V = a.logits.size(1);
  parallel_for(R, {.enabled = R > 1}, [&](int64_t begin, int64_t end) {
    std::vector<float> x(static_cast<size_t>(V));
    for (int64_t r = begin; r < end; ++r) {
      const T* row = a.logits.data<T>() + r * V;
      for (int64_t i = 0; i < V; ++i) x[static_cast<size_t>(i)] = to_float(row[i]);
      a.ids.data<int32_t>()[r] = sample_row(x, settings_of(a, r), a);
    }
  });
}

}  // namespace

void register_sampling_kernels(KernelRegistry& r) {
  for (DType d : kComputeDTypes) {
    visit_float(d, [&]<typename T>() {
      r.add<op::SampleRows>(DeviceType::cpu, d, "default", {.run = sample_rows<T>, .is_default = true});
    });
  }
}

}  // namespace tfm::cpu

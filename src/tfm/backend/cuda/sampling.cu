// Sampling on the device (op::SampleRows: op_set.h states the rules and their order, sampling_math.h the
// formulas the host shares): one block per row and no sort, so that a step hands the host one id per sequence.
// Penalized tokens are marked in a shared-memory bitmap, so that a walk over the row skips them and takes their
// penalized values from the row's entries instead. The top-k and top-p cuts are found digit by digit over
// order_key(value): four passes of 256-bin histograms each, counts for top-k, fixed-point masses for top-p
// (64-bit integer atomics: the sums come out the same in any order, so a seed gives the same tokens run after
// run). The draw is a reduction: the kept token with the largest race score. Nothing synchronises with the
// host, so the kernel can sit in a captured graph.
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"
#include "tfm/backend/sampling_math.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kThreads = 1024;
constexpr int kBins = 256;
constexpr int kBinsPerLane = kBins / 32;

// One row and its settings, as every walk over it reads them.
template <typename T>
struct Row {
  const T* x;               // the row's logits
  const int32_t* entries;   // (token, amount bits) pairs of the whole batch
  const uint32_t* marks;    // the row's bitmap of penalized tokens, or null
  int64_t V;
  int begin, end;
  float temperature, repetition_penalty;
  bool greedy;

  // The walk covers the row, then its entries.
  __device__ int64_t length() const { return V + end - begin; }

  // Element i of the walk: `token` with `y`, its value as the rules see it (penalties, then the temperature);
  // false for a marked token (its entry carries it) or an entry outside the row.
  __device__ bool token_at(int64_t i, int32_t& token, float& y) const {
    float v;
    if (i < V) {
      if (marks && (marks[i >> 5] >> (i & 31) & 1u)) return false;
      token = static_cast<int32_t>(i);
      v = to_float(x[i]);
    } else {
      const int64_t j = begin + (i - V);
      token = entries[2 * j];
      if (token < 0 || token >= V) return false;
      v = to_float(x[token]) - __int_as_float(entries[2 * j + 1]);
      if (repetition_penalty != 1.f) v = v < 0 ? v * repetition_penalty : v / repetition_penalty;
    }
    y = greedy ? v : v / temperature;
    return true;
  }
};

// Warp 0 chooses the digit of a cut from the histogram: scanning bins from the top, the first non-empty one at
// which the weight above it plus its own reaches `target`, else the lowest non-empty one; `above` (the weight
// above the prefix's range) moves past the bins above the chosen one. Lane l holds bins 255 - 8l down to
// 248 - 8l, so that lane order is bin order from the top.
__device__ int choose_bin(const uint32_t* counts, const unsigned long long* masses, bool weighted, uint64_t target,
                          uint64_t& above) {
  const int lane = threadIdx.x;
  uint64_t w[kBinsPerLane], lane_weight = 0;
  for (int j = 0; j < kBinsPerLane; ++j) {
    const int b = kBins - 1 - kBinsPerLane * lane - j;
    w[j] = weighted ? masses[b] : counts[b];
    lane_weight += w[j];
  }
  uint64_t before = lane_weight;  // inclusive scan over lanes, then made exclusive
  for (int offset = 1; offset < 32; offset <<= 1) {
    const uint64_t other = __shfl_up_sync(0xffffffffu, before, offset);
    if (lane >= offset) before += other;
  }
  before -= lane_weight;
  uint64_t run = above + before, above_hit = 0, above_lowest = 0;
  int hit = -1, lowest = -1;
  for (int j = 0; j < kBinsPerLane; ++j) {
    const int b = kBins - 1 - kBinsPerLane * lane - j;
    if (counts[b] == 0) continue;
    if (hit < 0 && run + w[j] >= target) {
      hit = b;
      above_hit = run;
    }
    lowest = b;
    above_lowest = run;
    run += w[j];
  }
  const unsigned hits = __ballot_sync(0xffffffffu, hit >= 0);
  const unsigned filled = __ballot_sync(0xffffffffu, lowest >= 0);
  const int source = hits ? __ffs(hits) - 1 : 31 - __clz(filled);
  above = __shfl_sync(0xffffffffu, hits ? above_hit : above_lowest, source);
  return __shfl_sync(0xffffffffu, hits ? hit : lowest, source);
}

// The cut of top-k (weighted false: every token weighs 1, target k) or top-p (weighted: tokens at or above
// `floor` weigh fixed_mass(exp(y - top)), target top_p times their total): the largest value whose tokens at or
// above it weigh at least the target, else the smallest weighed value.
template <typename T>
__device__ float select_cut(const Row<T>& r, bool weighted, float floor, float top, uint64_t k, float top_p,
                            uint32_t* counts, unsigned long long* masses, uint32_t* chosen_prefix) {
  uint32_t prefix = 0, mask = 0;
  uint64_t above = 0, target = k;  // warp 0's
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
      counts[b] = 0;
      masses[b] = 0;
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < r.length(); i += blockDim.x) {
      int32_t token;
      float y;
      if (!r.token_at(i, token, y) || (weighted && !(y >= floor && y != -INFINITY))) continue;
      const uint32_t key = order_key(y);
      if ((key & mask) != prefix) continue;
      const uint32_t bin = key >> shift & (kBins - 1);
      atomicAdd(&counts[bin], 1u);
      if (weighted) atomicAdd(&masses[bin], static_cast<unsigned long long>(fixed_mass(expf(y - top))));
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      if (weighted && shift == 24) {
        unsigned long long total = 0;
        for (int b = threadIdx.x; b < kBins; b += 32) total += masses[b];
        for (int offset = 16; offset > 0; offset >>= 1) total += __shfl_xor_sync(0xffffffffu, total, offset);
        target = static_cast<uint64_t>(top_p * static_cast<float>(total));
      }
      const int bin = choose_bin(counts, masses, weighted, target, above);
      if (threadIdx.x == 0) *chosen_prefix = prefix | static_cast<uint32_t>(bin) << shift;
    }
    __syncthreads();
    prefix = *chosen_prefix;  // rewritten only after the next level's histogram barrier
    mask |= static_cast<uint32_t>(kBins - 1) << shift;
  }
  return from_order_key(prefix);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sample_rows_kernel(const T* logits, int64_t V, const SampleSettings* settings, const int32_t* entries,
                       int num_entries, int32_t* ids) {
  extern __shared__ uint32_t marks[];  // (V + 31) / 32 words
  __shared__ uint32_t counts[kBins], chosen_prefix;
  __shared__ unsigned long long masses[kBins];
  __shared__ Candidate warps[32];
  wait_for_previous_kernel();
  const SampleSettings s = settings[blockIdx.x];
  Row<T> r;
  r.x = logits + blockIdx.x * V;
  r.entries = entries;
  r.marks = nullptr;
  r.V = V;
  r.begin = min(max(s.penalties_begin, 0), num_entries);
  r.end = min(max(s.penalties_end, r.begin), num_entries);
  r.temperature = s.temperature;
  r.repetition_penalty = s.repetition_penalty;
  r.greedy = s.temperature <= 0;
  if (r.end > r.begin) {
    const int64_t words = (V + 31) / 32;
    for (int64_t w = threadIdx.x; w < words; w += blockDim.x) marks[w] = 0;
    __syncthreads();
    for (int j = r.begin + threadIdx.x; j < r.end; j += blockDim.x) {
      const int32_t t = entries[2 * j];
      if (t >= 0 && t < V) atomicOr(&marks[t >> 5], 1u << (t & 31));
    }
    __syncthreads();
    r.marks = marks;
  }

  // The largest value (the first of equal ones), and whether the row has a distribution at all.
  Candidate best = no_candidate();
  bool invalid = false;
  for (int64_t i = threadIdx.x; i < r.length(); i += blockDim.x) {
    int32_t token;
    float y;
    if (!r.token_at(i, token, y)) continue;
    invalid = invalid || isnan(y) || y == INFINITY;
    const Candidate c{y, token};
    if (better(c, best)) best = c;
  }
  invalid = __syncthreads_or(invalid);
  best = block_best(best, warps);
  const float top = best.value;
  if (invalid || top == -INFINITY || r.greedy) {
    if (threadIdx.x == 0) ids[blockIdx.x] = invalid || top == -INFINITY ? -1 : static_cast<int32_t>(best.index);
    return;
  }

  float floor = -INFINITY;
  if (s.top_k > 0 && s.top_k < V)
    floor = select_cut(r, false, floor, top, static_cast<uint64_t>(s.top_k), 0.f, counts, masses, &chosen_prefix);
  if (s.top_p < 1) floor = select_cut(r, true, floor, top, 0, s.top_p, counts, masses, &chosen_prefix);
  const uint64_t key = static_cast<uint64_t>(s.key_high) << 32 | s.key_low;
  Candidate pick = no_candidate();
  for (int64_t i = threadIdx.x; i < r.length(); i += blockDim.x) {
    int32_t token;
    float y;
    if (!r.token_at(i, token, y) || !(y >= floor && y != -INFINITY)) continue;
    if (s.min_p > 0 && !(expf(y - top) >= s.min_p)) continue;
    const Candidate c{race_score(y, key, token), token};
    if (better(c, pick)) pick = c;
  }
  pick = block_best(pick, warps);
  if (threadIdx.x == 0) ids[blockIdx.x] = pick.index == INT64_MAX ? -1 : static_cast<int32_t>(pick.index);
}

}  // namespace

template <typename T>
void sample_rows(const T* logits, int64_t rows, int64_t V, const SampleSettings* settings, const int32_t* entries,
                 int64_t num_entries, int32_t* ids) {
  if (rows == 0) return;
  const auto kernel = sample_rows_kernel<device_t<T>>;
  const size_t mark_bytes = static_cast<size_t>((V + 31) / 32) * sizeof(uint32_t);
  if (mark_bytes > 32 * 1024) {  // past what a block gets without asking, with the static arrays
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(mark_bytes)),
               "cudaFuncSetAttribute(sample_rows)");
  }
  launch_chained(kernel, static_cast<unsigned>(rows), kThreads, mark_bytes, on_device(logits), V, settings, entries,
                 static_cast<int>(num_entries), ids);
  check_launch("sample_rows");
}

template void sample_rows<float>(const float*, int64_t, int64_t, const SampleSettings*, const int32_t*, int64_t,
                                 int32_t*);
template void sample_rows<bfloat16>(const bfloat16*, int64_t, int64_t, const SampleSettings*, const int32_t*,
                                    int64_t, int32_t*);
template void sample_rows<float16>(const float16*, int64_t, int64_t, const SampleSettings*, const int32_t*, int64_t,
                                   int32_t*);

}  // namespace tfm::cuda::launch

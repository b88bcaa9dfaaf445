// Sampling on the device (op::SampleRows: op_set.h states the rules and their order, sampling_math.h the
// formulas the host shares), with no sort, so that a step hands the host one id per sequence. Penalized tokens
// are marked in a shared-memory bitmap, so that a walk over the row skips them and takes their penalized values
// from the row's entries instead. The top-k and top-p cuts are found digit by digit over order_key(value): four
// passes of 256-bin histograms each, counts for top-k, fixed-point masses for top-p (64-bit integer atomics: the
// sums come out the same in any order, so a seed gives the same tokens run after run). The draw is a reduction:
// the kept token with the largest race score. Nothing synchronises with the host, so the kernel can sit in a
// captured graph.
//
// A block walking a whole 151,936-word row ten times takes ~0.4 ms, so where the batch leaves the device idle a
// row is split over several blocks: for a row with a top-k of at most kMaxSplitTopK, each block cuts its slice
// of the row to the slice's top-k (and the tokens tied with the last of them) and writes those candidates; the
// last block of the row to finish (split_blocks.h) runs the rules over the candidates alone. Every token the row's
// top-k keeps is a candidate of its slice (a slice's k-th largest value is at most the row's), so the cuts, the
// masses and the draw come out as over the whole row. Other rows, and slices with more tied candidates than they
// hold, leave the whole row to that last block.
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"
#include "tfm/backend/cuda/split_blocks.h"
#include "tfm/backend/sampling_math.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kThreads = 1024;
constexpr int kBins = 256;
constexpr int kBinsPerLane = kBins / 32;
constexpr int64_t kMinSliceTokens = 4096;  // a split block's share of a row, at least
constexpr int kMaxSplits = 64;
constexpr int kMaxSplitTopK = 64;      // rows with a top-k up to this are split
constexpr int kMaxCandidates = 128;    // a slice's candidates: its top-k and the tokens tied with the last

// A walk over tokens lo .. hi - 1 of one row and then the row's penalty entries for those tokens, as every pass
// over it reads them.
template <typename T>
struct Row {
  const T* x;               // the row's logits
  const int32_t* entries;   // (token, amount bits) pairs of the whole batch
  const uint32_t* marks;    // the penalized tokens among lo .. hi - 1 (bit t - lo), or null
  int64_t lo, hi;
  int begin, end;
  float temperature, repetition_penalty;
  bool greedy;

  __device__ int64_t length() const { return hi - lo + end - begin; }

  // Element i of the walk: `token` with `y`, its value as the rules see it (penalties, then the temperature);
  // false for a marked token (its entry carries it) or an entry outside lo .. hi - 1.
  __device__ bool token_at(int64_t i, int32_t& token, float& y) const {
    float v;
    if (i < hi - lo) {
      if (marks && (marks[i >> 5] >> (i & 31) & 1u)) return false;
      token = static_cast<int32_t>(lo + i);
      v = to_float(x[lo + i]);
    } else {
      const int64_t j = begin + (i - (hi - lo));
      token = entries[2 * j];
      if (token < lo || token >= hi) return false;
      v = to_float(x[token]) - __int_as_float(entries[2 * j + 1]);
      if (repetition_penalty != 1.f) v = v < 0 ? v * repetition_penalty : v / repetition_penalty;
    }
    y = greedy ? v : v / temperature;
    return true;
  }
};

// What a slice leaves its row: up to kMaxCandidates (token, value) pairs, and how many (kOverflow: more than
// that many tied). A NaN is kept as a candidate too (+inf is above any cut), so that the walk over the
// candidates finds a row without a distribution as the walk over the row does.
struct SliceCandidate {
  float y;
  int32_t token;
};
constexpr int32_t kOverflow = -1;

// The candidates of a split row as a walk: slice s's count[s] pairs, one slice after another.
struct CandidateWalk {
  const SliceCandidate* candidates;  // splits x kMaxCandidates
  const int32_t* starts;             // splits + 1 running counts, in shared memory
  int splits;

  __device__ int64_t length() const { return starts[splits]; }
  __device__ bool token_at(int64_t i, int32_t& token, float& y) const {
    int lo = 0, hi = splits - 1;  // the last slice s with starts[s] <= i
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (starts[mid] <= i) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const SliceCandidate c = candidates[lo * kMaxCandidates + (i - starts[lo])];
    token = c.token;
    y = c.y;
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
template <typename Walk>
__device__ float select_cut(const Walk& r, bool weighted, float floor, float top, uint64_t k, float top_p,
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

// Marks the penalized tokens of r.lo .. r.hi - 1 in `marks` and has the walk skip them, where the row has entries.
template <typename T>
__device__ void mark_penalized(Row<T>& r, uint32_t* marks) {
  if (r.end <= r.begin) return;
  const int64_t words = (r.hi - r.lo + 31) / 32;
  for (int64_t w = threadIdx.x; w < words; w += blockDim.x) marks[w] = 0;
  __syncthreads();
  for (int j = r.begin + threadIdx.x; j < r.end; j += blockDim.x) {
    const int64_t t = r.entries[2 * j];
    if (t >= r.lo && t < r.hi) atomicOr(&marks[(t - r.lo) >> 5], 1u << ((t - r.lo) & 31));
  }
  __syncthreads();
  r.marks = marks;
}

// The rules over a walk that holds every token they could keep: the token id, or -1 where the row has no
// distribution (a NaN or +inf, or nothing above -inf).
template <typename Walk>
__device__ int32_t sample_walk(const Walk& r, const SampleSettings& s, int64_t V, bool greedy,
                               uint32_t* counts, unsigned long long* masses, uint32_t* chosen_prefix,
                               Candidate* warps) {
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
  if (invalid || top == -INFINITY) return -1;
  if (greedy) return static_cast<int32_t>(best.index);

  float floor = -INFINITY;
  if (s.top_k > 0 && s.top_k < V)
    floor = select_cut(r, false, floor, top, static_cast<uint64_t>(s.top_k), 0.f, counts, masses, chosen_prefix);
  if (s.top_p < 1) floor = select_cut(r, true, floor, top, 0, s.top_p, counts, masses, chosen_prefix);
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
  return pick.index == INT64_MAX ? -1 : static_cast<int32_t>(pick.index);
}

// Block (row, split). Unsplit (one split), the block samples the row. Split, a row that takes candidates has
// each block write its slice's (rows x splits candidate lists and their counts) and the last to finish
// sample from them; any other row is sampled whole by its last block.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    sample_rows_kernel(const T* logits, int64_t V, const SampleSettings* settings, const int32_t* entries,
                       int num_entries, int32_t* taken_counts, SliceCandidate* candidates, unsigned* arrivals,
                       int32_t* ids) {
  extern __shared__ uint32_t marks[];  // (V + 31) / 32 words
  __shared__ uint32_t counts[kBins], chosen_prefix;
  __shared__ unsigned long long masses[kBins];
  __shared__ Candidate warps[32];
  __shared__ int32_t taken, starts[kMaxSplits + 1];
  __shared__ bool last;
  wait_for_previous_kernel();
  const int64_t row = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
  const SampleSettings s = settings[row];
  Row<T> r;
  r.x = logits + row * V;
  r.entries = entries;
  r.marks = nullptr;
  r.lo = 0;
  r.hi = V;
  r.begin = min(max(s.penalties_begin, 0), num_entries);
  r.end = min(max(s.penalties_end, r.begin), num_entries);
  r.temperature = s.temperature;
  r.repetition_penalty = s.repetition_penalty;
  r.greedy = s.temperature <= 0;
  const bool by_candidates = splits > 1 && !r.greedy && s.top_k > 0 && s.top_k <= kMaxSplitTopK && s.top_k < V;
  if (by_candidates) {
    const int64_t slice = (V + splits - 1) / splits;
    r.lo = min(V, split * slice);
    r.hi = min(V, r.lo + slice);
    mark_penalized(r, marks);
    const float floor = select_cut(r, false, -INFINITY, 0.f, static_cast<uint64_t>(s.top_k), 0.f, counts, masses,
                                   &chosen_prefix);
    if (threadIdx.x == 0) taken = 0;
    __syncthreads();
    SliceCandidate* mine = candidates + (row * splits + split) * kMaxCandidates;
    for (int64_t i = threadIdx.x; i < r.length(); i += blockDim.x) {
      int32_t token;
      float y;
      if (!r.token_at(i, token, y) || !(y >= floor || isnan(y))) continue;
      const int at = atomicAdd(&taken, 1);
      if (at < kMaxCandidates) mine[at] = {y, token};
    }
    __syncthreads();
    if (threadIdx.x == 0) taken_counts[row * splits + split] = taken <= kMaxCandidates ? taken : kOverflow;
  }
  if (splits > 1) {
    __threadfence();  // the slice's candidates are visible before its arrival counts
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(arrivals + row, 1u) == static_cast<unsigned>(splits - 1);
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (threadIdx.x == 0) arrivals[row] = 0;
  }
  // The candidates serve unless a slice overflowed.
  bool whole = !by_candidates;
  if (by_candidates) {
    if (threadIdx.x == 0) {
      int32_t total = 0;
      for (int64_t i = 0; i < splits && total != kOverflow; ++i) {
        const int32_t n = taken_counts[row * splits + i];
        starts[i] = total;
        total = n == kOverflow ? kOverflow : total + n;
      }
      starts[splits] = total;
      taken = total;
    }
    __syncthreads();
    whole = taken == kOverflow;
  }
  int32_t id;
  if (whole) {
    r.lo = 0;
    r.hi = V;
    r.marks = nullptr;
    mark_penalized(r, marks);
    id = sample_walk(r, s, V, r.greedy, counts, masses, &chosen_prefix, warps);
  } else {
    const CandidateWalk walk{candidates + row * splits * kMaxCandidates, starts, static_cast<int>(splits)};
    id = sample_walk(walk, s, V, false, counts, masses, &chosen_prefix, warps);
  }
  if (threadIdx.x == 0) ids[row] = id;
}

// Splits of each row: none unless the rows leave multiprocessors idle, then enough blocks for about one a
// multiprocessor, none walking less than kMinSliceTokens.
int64_t split_count(int64_t rows, int64_t V) {
  static const int64_t sms = multiprocessors();
  if (rows >= sms) return 1;
  const int64_t by_device = (sms + rows - 1) / rows, by_length = (V + kMinSliceTokens - 1) / kMinSliceTokens;
  return std::clamp<int64_t>(std::min(by_device, by_length), 1, kMaxSplits);
}

}  // namespace

int64_t sample_rows_workspace_bytes(int64_t rows, int64_t V) {
  const int64_t splits = rows > 0 ? split_count(rows, V) : 1;
  return splits > 1 ? rows * splits *
                          static_cast<int64_t>(sizeof(int32_t) + kMaxCandidates * sizeof(SliceCandidate))
                    : 0;
}

template <typename T>
void sample_rows(const T* logits, int64_t rows, int64_t V, const SampleSettings* settings, const int32_t* entries,
                 int64_t num_entries, int32_t* ids, void* workspace) {
  if (rows == 0) return;
  const auto kernel = sample_rows_kernel<device_t<T>>;
  const size_t mark_bytes = static_cast<size_t>((V + 31) / 32) * sizeof(uint32_t);
  if (mark_bytes > 32 * 1024) {  // past what a block gets without asking, with the static arrays
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(mark_bytes)),
               "cudaFuncSetAttribute(sample_rows)");
  }
  const int64_t splits = split_count(rows, V);
  auto* candidates = static_cast<SliceCandidate*>(workspace);
  auto* taken_counts =
      splits > 1 ? reinterpret_cast<int32_t*>(candidates + rows * splits * kMaxCandidates) : nullptr;
  unsigned* arrivals = splits > 1 ? arrival_counters(rows, "sample_rows") : nullptr;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(splits));
  launch_chained(kernel, grid, kThreads, mark_bytes, on_device(logits), V, settings, entries,
                 static_cast<int>(num_entries), taken_counts, candidates, arrivals, ids);
  check_launch("sample_rows");
}

template void sample_rows<float>(const float*, int64_t, int64_t, const SampleSettings*, const int32_t*, int64_t,
                                 int32_t*, void*);
template void sample_rows<bfloat16>(const bfloat16*, int64_t, int64_t, const SampleSettings*, const int32_t*,
                                    int64_t, int32_t*, void*);
template void sample_rows<float16>(const float16*, int64_t, int64_t, const SampleSettings*, const int32_t*, int64_t,
                                   int32_t*, void*);

}  // namespace tfm::cuda::launch

// Paged attention, in four kernels:
// - rows: one block per (query row, head), keys visited in blocks of kKeyBlock as the CPU's kernels.cpp
//   (after torch's CPU kernel) takes them. It serves eager attention (whose roundings it reproduces) and head
//   sizes the other two do not take.
// - split rows (decode): one block per (query row, the query heads of a kv head, split of the keys); each
//   group of lanes scores a key for every head from 16-byte loads of it, keeps their running softmaxes, and
//   the last split of a row to finish combines them. Enough splits to fill the device even for one sequence.
//   It also serves op::QkvAttention, making its queries and the row's new key and value from the fused
//   projection.
// - group tiles (decode, bf16 and fp16, where the rows fill the device with GQA groups): one block per (query
//   row, kv head, split); the kv head's query heads are rows of one tensor-core fragment, and each warp takes
//   16-key tiles of K and V in turn through shared memory.
// - tiles (prefill, bf16 and fp16): one block per 64 query rows of a sequence and a head; 64-key tiles of K
//   and V in shared memory, q k^T and p v on the tensor cores (mma.sync, float32 accumulation) with the
//   scores and weights in registers, the softmax in float32 with a running maximum (flash attention 2's
//   forward).
// The one-pass forms round each weight to T where it multiplies V, against the running maximum of the keys
// visited so far, as the "flash" variant is specified; only where that maximum moves differs between them.
#include <cstdlib>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tfm/backend/cuda/attention_tiles.cuh"
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/head_lanes.cuh"
#include "tfm/backend/cuda/launchers.h"
#include "tfm/backend/cuda/mma_fragments.cuh"
#include "tfm/backend/cuda/split_blocks.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kThreads = 128;
constexpr int kDimsPerThread = 4;  // head_dim up to kThreads * kDimsPerThread
constexpr int kKeyBlock = 512;
constexpr int kKeysPerThread = kKeyBlock / kThreads;

// The sequence that query row `row` belongs to: the last s with query_start[s] <= row, or num_seqs for rows
// past every sequence (which stay unwritten, as on the CPU).
__device__ int64_t sequence_of(const int32_t* query_start, int64_t num_seqs, int64_t row) {
  int64_t lo = 0, hi = num_seqs + 1;  // query_start[lo] <= row < query_start[hi], treating the ends as open
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    (query_start[mid] <= row ? lo : hi) = mid;
  }
  return lo;
}

// Key or value j of sequence s's block table for kv head `kv_head`. Positions and block sizes fit 32 bits,
// and a power-of-two block size (the engine's) takes a shift and a mask: a 64-bit division, tens of
// instructions, was a large part of the split-rows kernel's work a key.
// cache_offset is its first element's index in either cache.
__device__ inline int64_t cache_offset(const PagedAttentionArgs& a, const int32_t* blocks, int64_t j,
                                       int64_t kv_head) {
  const unsigned key = static_cast<unsigned>(j), size = static_cast<unsigned>(a.block_size);
  unsigned block, offset;
  if ((size & (size - 1)) == 0) {
    block = key >> (__ffs(size) - 1);
    offset = key & (size - 1);
  } else {
    block = key / size;
    offset = key - block * size;
  }
  const int64_t slot = static_cast<int64_t>(blocks[block]) * a.block_size + offset;
  return (slot * a.kv_heads + kv_head) * a.head_dim;
}
template <typename T>
__device__ const T* cache_entry(const PagedAttentionArgs& a, const void* cache, const int32_t* blocks,
                                int64_t j, int64_t kv_head) {
  return static_cast<const T*>(cache) + cache_offset(a, blocks, j, kv_head);
}

// Eager materialises the softmax as Transformers' eager attention: every score rounded to T (q k^T, then
// times scale), the row's maximum and sum found in a first pass, each probability rounded to T. Otherwise one
// pass keeps float32 scores; each weight is exp(score - the maximum so far, this block's included), rounded
// to T where it multiplies the values while the denominator sums it unrounded, and what was summed is
// rescaled whenever a block raises the maximum (sdpa, flash).
template <typename T, bool Eager>
__global__ void rows_kernel(PagedAttentionArgs a) {
  wait_for_previous_kernel();
  extern __shared__ float q[];  // head_dim
  __shared__ float shared[32];
  __shared__ float weights[kKeyBlock];
  const int64_t row = blockIdx.x / a.heads, h = blockIdx.x % a.heads, D = a.head_dim;
  const int64_t s = sequence_of(a.query_start, a.num_seqs, row);
  if (s == a.num_seqs) return;
  const int64_t pos = a.positions[row];
  const int64_t last = min(pos, static_cast<int64_t>(a.context_lens[s]) - 1);
  const int64_t first = a.window > 0 ? max(int64_t{0}, pos - a.window + 1) : 0;
  const int32_t* blocks = a.block_tables + s * a.max_blocks;
  const int64_t kv_head = h / (a.heads / a.kv_heads);
  const T* q_row = static_cast<const T*>(a.q) + (row * a.heads + h) * D;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) q[i] = to_float(q_row[i]);
  __syncthreads();

  // The scores of this thread's keys of the block at j0 (-infinity past the last key), and their maximum.
  auto score_block = [&](int64_t j0, float(&scores)[kKeysPerThread]) {
    float block_max = -INFINITY;
    for (int k = 0; k < kKeysPerThread; ++k) {
      const int64_t j = j0 + threadIdx.x + k * kThreads;
      float score = -INFINITY;
      if (j <= last) {
        const T* key = cache_entry<T>(a, a.cache_k, blocks, j, kv_head);
        float dot = 0.f;
        for (int64_t i = 0; i < D; ++i) dot += q[i] * to_float(key[i]);
        score = Eager ? round_to<T>(round_to<T>(dot) * a.scale) : dot * a.scale;
      }
      block_max = fmaxf(block_max, scores[k] = score);
    }
    return block_max;
  };

  float running_max = -INFINITY, denom = 0.f;
  float scores[kKeysPerThread];
  if constexpr (Eager) {
    for (int64_t j0 = first; j0 <= last; j0 += kKeyBlock) {
      const float new_max = fmaxf(running_max, block_max(score_block(j0, scores), shared));
      float sum = 0.f;
      for (float score : scores) sum += expf(score - new_max);
      denom = denom * expf(running_max - new_max) + block_sum(sum, shared);
      running_max = new_max;
    }
  }
  float acc[kDimsPerThread] = {};
  for (int64_t j0 = first; j0 <= last; j0 += kKeyBlock) {
    const float scores_max = score_block(j0, scores);
    if constexpr (!Eager) {
      const float new_max = fmaxf(running_max, block_max(scores_max, shared));
      const float rescale = expf(running_max - new_max);  // 0 for the first block
      denom *= rescale;
      for (float& x : acc) x *= rescale;
      running_max = new_max;
    }
    float sum = 0.f;
    for (int k = 0; k < kKeysPerThread; ++k) {
      const float p = expf(scores[k] - running_max);
      sum += p;
      weights[threadIdx.x + k * kThreads] = round_to<T>(Eager ? p / denom : p);
    }
    if constexpr (!Eager) denom += block_sum(sum, shared);
    __syncthreads();
    const int64_t keys = min(static_cast<int64_t>(kKeyBlock), last - j0 + 1);
    for (int64_t t = 0; t < keys; ++t) {
      const T* v = cache_entry<T>(a, a.cache_v, blocks, j0 + t, kv_head);
      for (int k = 0; k < kDimsPerThread; ++k) {
        const int64_t i = threadIdx.x + k * kThreads;
        if (i < D) acc[k] += weights[t] * to_float(v[i]);
      }
    }
    __syncthreads();
  }
  T* o = static_cast<T*>(a.out) + (row * a.heads + h) * D;
  const float inv = last < first ? 0.f : Eager ? 1.f : 1.f / denom;
  for (int k = 0; k < kDimsPerThread; ++k) {
    const int64_t i = threadIdx.x + k * kThreads;
    if (i < D) o[i] = from_float<T>(acc[k] * inv);
  }
}


// The keys row `row` of sequence s attends to: [first, last] (empty when last < first).
struct KeyRange {
  int64_t first, last;
};
__device__ KeyRange key_range(const PagedAttentionArgs& a, int64_t s, int64_t pos) {
  const int64_t last = min(pos, static_cast<int64_t>(a.context_lens[s]) - 1);
  const int64_t first = a.window > 0 ? max(int64_t{0}, pos - a.window + 1) : 0;
  return {first, last};
}

// The keys split `split` of `splits` takes of row `row`'s: [begin, end) of sequence `seq`, whose block table
// is `blocks`. seq is num_seqs for a row past every sequence (which stays unwritten).
struct SplitKeys {
  int64_t seq, begin, end;
  const int32_t* blocks;
};
__device__ SplitKeys split_keys(const PagedAttentionArgs& a, int64_t row, int split, int splits) {
  const int64_t s = sequence_of(a.query_start, a.num_seqs, row);
  if (s == a.num_seqs) return {s, 0, 0, nullptr};
  const KeyRange range = key_range(a, s, a.positions[row]);
  const int64_t count = max(int64_t{0}, range.last - range.first + 1);
  const int64_t chunk = (count + splits - 1) / splits;
  const int64_t begin = range.first + split * chunk;
  return {s, begin, min(range.last + 1, begin + chunk), a.block_tables + s * a.max_blocks};
}

// A partial softmax over some keys in base 2 (scores scaled by log2(e)): its maximum score, its sum of
// 2^(score - max) and the weighted values. Combining weighs each by 2^(its max - the overall max); an empty
// one (max -inf) weighs nothing.
__device__ float weight_of(float part_max, float overall_max) {
  return part_max == -INFINITY ? 0.f : exp2f(part_max - overall_max);
}

// The partial states of one (row, head)'s splits merged into its output, by the block that finished last. The
// loads bypass L1, which may hold nothing of what the other blocks wrote but must not be trusted to.
template <typename T>
__device__ void combine_splits(const PagedAttentionArgs& a, int64_t out_index, int splits, const float* partial) {
  const int64_t D = a.head_dim;
  const float* parts = partial + out_index * splits * (D + 2);
  float overall = -INFINITY;
  for (int i = 0; i < splits; ++i) overall = fmaxf(overall, __ldcg(parts + i * (D + 2)));
  float total = 0.f;
  for (int i = 0; i < splits; ++i)
    total += __ldcg(parts + i * (D + 2) + 1) * weight_of(__ldcg(parts + i * (D + 2)), overall);
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float v = 0.f;
    for (int i = 0; i < splits; ++i)
      v += __ldcg(parts + i * (D + 2) + 2 + d) * weight_of(__ldcg(parts + i * (D + 2)), overall);
    static_cast<T*>(a.out)[out_index * D + d] = from_float<T>(total > 0.f ? v / total : 0.f);
  }
}

// The partial softmaxes of a block's parts (its lane groups or warps, each over some of the block's keys) for
// G query heads, in shared memory for the merge.
template <int D, int G, int Parts>
struct PartStates {
  float max[Parts][G], sum[Parts][G];
  float acc[Parts][G][D];
};

// The block's parts merged into the outputs of query heads h0 .. h0 + G - 1 of `row` where the row's keys are
// in one split; else into the partial state of split `split`, and the last of the splits to arrive (counted
// in `arrivals`, which it sets back to zero) combines them.
template <typename T, int D, int G, int Parts>
__device__ void finish_split(const PagedAttentionArgs& a, const PartStates<D, G, Parts>& parts, int64_t row,
                             int64_t h0, int split, int splits, float* partial, unsigned* arrivals) {
  for (int g = 0; g < G; ++g) {
    float overall = -INFINITY;
    for (int k = 0; k < Parts; ++k) overall = fmaxf(overall, parts.max[k][g]);
    float total = 0.f;
    for (int k = 0; k < Parts; ++k) total += parts.sum[k][g] * weight_of(parts.max[k][g], overall);
    const int64_t out_index = row * a.heads + h0 + g;
    float* part = splits > 1 ? partial + (out_index * splits + split) * (D + 2) : nullptr;
    if (splits > 1 && threadIdx.x == 0) {
      part[0] = overall;
      part[1] = total;
    }
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
      float v = 0.f;
      for (int k = 0; k < Parts; ++k) v += parts.acc[k][g][d] * weight_of(parts.max[k][g], overall);
      if (splits > 1) {
        part[2 + d] = v;
      } else {
        static_cast<T*>(a.out)[out_index * D + d] = from_float<T>(total > 0.f ? v / total : 0.f);
      }
    }
  }
  if (splits == 1) return;
  __shared__ bool last;
  __threadfence();  // this block's partial states are visible before its arrival counts
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(arrivals + blockIdx.x, 1u) == static_cast<unsigned>(splits - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int g = 0; g < G; ++g) combine_splits<T>(a, row * a.heads + h0 + g, splits, partial);
  if (threadIdx.x == 0) arrivals[blockIdx.x] = 0;
}

constexpr int kSplitWarps = 4;
constexpr int kMaxSplits = 32;
constexpr int64_t kMinSplitKeys = 64;
constexpr int kRoundsInFlight = 4;
constexpr int kStages = 2;  // the next rounds' keys and values copy while these are used

// The split-rows kernel's dynamic shared memory: the merge of the block's groups and, where the kernel stages
// its keys (kStagesKeys), before it each thread's staged pieces of its keys and values (cp.async, kStages x
// kRoundsInFlight rounds; thread-minor, so that a warp's 16-byte accesses fall in distinct banks), which only
// that thread reads. Staging pays where the rows fill the device (heads_per_block groups heads, G > 1) and
// reading the cache is the bound (the engine's 8B steps of 256 rows: 11,198 -> 12,322 tokens/s on an H100);
// with a few rows each block holds few keys, and the copies' extra latency cost more than they hid (0.6B
// batch-1 decode 999 -> 928 tokens/s), so those loads go to registers. Where the group-tiles kernel takes
// such steps (bf16 and fp16 up to head size 128) the staged form serves float32 and head size 256.
template <typename T, int D, int G>
struct SplitLayout {
  static constexpr bool kStagesKeys = G > 1;
  static constexpr int kThreads = kSplitWarps * 32;
  static constexpr int kPieces = head_lanes(sizeof(T), D).dims * sizeof(T) / 16;
  static constexpr int kGroups = kThreads / head_lanes(sizeof(T), D).lanes;
  static constexpr size_t kStaged =
      kStagesKeys ? sizeof(uint4) * kStages * kRoundsInFlight * 2 * kPieces * kThreads : 0;
  static constexpr size_t kMerge = sizeof(PartStates<D, G, kGroups>);
  static constexpr size_t kBytes = kStaged > kMerge ? kStaged : kMerge;
  __device__ static uint4& piece(unsigned char* smem, int stage, int round, bool value, int p) {
    const int at = (((stage * kRoundsInFlight + round) * 2 + value) * kPieces + p) * kThreads;
    return reinterpret_cast<uint4*>(smem)[at + static_cast<int>(threadIdx.x)];
  }
};

// One block per (row, group of G query heads that share a kv head) and split blockIdx.y of the row's keys, so
// that each key and value is read once for the G heads (GQA's group where heads_per_block chooses it, else
// 1). A group of kLanes lanes takes one key at a time: each lane holds kDims of each query's dimensions, the
// group sums the G dot products by shuffles, and each lane keeps G running softmaxes and their dimensions of
// the weighted values. The block's groups are merged in shared memory; with one split the block writes the
// outputs, else its partial states, and the last of the splits to arrive (counted in `arrivals`, which it
// sets back to zero) combines them. Each head's result is what a block of its own would give: the same keys
// in the same order. Where SplitLayout stages the keys, a thread's pieces of the next kRoundsInFlight rounds
// copy into shared memory (cp.async) while it works on these: with the loads in registers a warp waits out a
// whole memory latency every four rounds (ncu, engine's 8B steps: 25% of DRAM bandwidth, three blocks a
// multiprocessor at 162 registers, 0.59 eligible warps a scheduler). FromQkv
// (op::QkvAttention, one row a sequence): the queries come from the fused projection `in.qkv`, made as
// qkv_rope_cache makes them, and so does the row's own new key and value, which the split that holds the
// row's position takes from registers where the others' keys come from the cache; the first split of the kv
// head's first query head writes them into the cache, for the steps after this one.
template <typename T, int D, int G, bool FromQkv>
__global__ void __launch_bounds__(kSplitWarps * 32, G <= 4 ? 4 : 1)
    split_rows_kernel(PagedAttentionArgs a, QkvRopeCacheArgs in, float* partial, unsigned* arrivals) {
  using L = SplitLayout<T, D, G>;
  constexpr int kLanes = head_lanes(sizeof(T), D).lanes, kDims = head_lanes(sizeof(T), D).dims;
  constexpr int kPiece = 16 / sizeof(T), kPiecesPerLane = L::kPieces, kGroups = L::kGroups;
  extern __shared__ __align__(128) unsigned char smem[];
  wait_for_previous_kernel();

  const int64_t head_groups = a.heads / G;
  const int64_t row = blockIdx.x / head_groups, h0 = blockIdx.x % head_groups * G;
  const int split = blockIdx.y, splits = gridDim.y;
  const SplitKeys keys = split_keys(a, row, split, splits);
  if (keys.seq == a.num_seqs) return;
  const int64_t begin = keys.begin, end = keys.end;
  const int32_t* blocks = keys.blocks;
  const int64_t kv_head = h0 / (a.heads / a.kv_heads);
  const int group = threadIdx.x / kLanes, sub = threadIdx.x % kLanes;

  const T* qkv_row = FromQkv ? static_cast<const T*>(in.qkv) + row * (a.heads + 2 * a.kv_heads) * D : nullptr;
  float q[G][kDims];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if constexpr (FromQkv) {
      load_dims(qkv_row + (h0 + g) * D, sub, q[g]);
      normalise_and_rotate<T, kLanes>(in, row, in.q_norm, sub, q[g]);
    } else {
      load_dims(static_cast<const T*>(a.q) + (row * a.heads + h0 + g) * D, sub, q[g]);
    }
#pragma unroll
    for (int i = 0; i < kDims; ++i) q[g][i] *= a.scale * kLog2e;  // scores in base 2
  }
  // FromQkv: the row's new key and value, for the split whose keys include its position and for the writer.
  const int64_t position = a.positions[row];
  const bool uses_new = FromQkv && begin <= position && position < end;
  uint4 new_k[kPiecesPerLane], new_v[kPiecesPerLane];
  if constexpr (FromQkv) {
    const int64_t slot = in.slots[row];
    const bool writes = split == 0 && h0 % (a.heads / a.kv_heads) == 0 && slot >= 0;
    if (uses_new || writes) {  // the same for the whole block
      float k[kDims];
      load_dims(qkv_row + (a.heads + kv_head) * D, sub, k);
      normalise_and_rotate<T, kLanes>(in, row, in.k_norm, sub, k);
      pack_dims<T>(k, new_k);
      load_pieces<T, kDims>(qkv_row + (a.heads + a.kv_heads + kv_head) * D, sub, new_v);
      if (writes && group == 0) {
        const int64_t at = (slot * a.kv_heads + kv_head) * D;
        store_pieces<T, kDims>(static_cast<T*>(in.cache_k) + at, sub, new_k);
        store_pieces<T, kDims>(static_cast<T*>(in.cache_v) + at, sub, new_v);
      }
    }
  }
  float running_max[G], sum[G], acc[G][kDims];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    running_max[g] = -INFINITY;
    sum[g] = 0.f;
#pragma unroll
    for (int i = 0; i < kDims; ++i) acc[g][i] = 0.f;
  }
  // Every lane runs every round (the shuffles need the whole group); a group past the split's end idles.
  // stage_keys loads this thread's pieces of the rounds from `first` (not a key past the split's end, nor the
  // row's own, which is in registers): into `held`, or staged, copying into shared memory as one committed
  // group of copies, empty or not, so that waiting for all but the latest group waits for the rounds about to
  // be used.
  constexpr bool kStaged = L::kStagesKeys;
  uint4 held[kStaged ? 1 : kRoundsInFlight][2][kPiecesPerLane];
  const int64_t step = kGroups * kRoundsInFlight;
  const auto stage_keys = [&](int64_t first, int stage) {
#pragma unroll
    for (int r = 0; r < kRoundsInFlight; ++r) {
      const int64_t j = first + r * kGroups + group;
      if (j >= end || (uses_new && j == position)) continue;
      const T* key = cache_entry<T>(a, a.cache_k, blocks, j, kv_head);
      const T* value = cache_entry<T>(a, a.cache_v, blocks, j, kv_head);
      if constexpr (kStaged) {
#pragma unroll
        for (int p = 0; p < kPiecesPerLane; ++p) {
          __pipeline_memcpy_async(&L::piece(smem, stage, r, false, p), key + sub * kDims + p * kPiece, 16);
          __pipeline_memcpy_async(&L::piece(smem, stage, r, true, p), value + sub * kDims + p * kPiece, 16);
        }
      } else {
        load_pieces<T, kDims>(key, sub, held[r][0]);
        load_pieces<T, kDims>(value, sub, held[r][1]);
      }
    }
    if constexpr (kStaged) __pipeline_commit();
  };
  // Round r's pieces of the key (or value) from `first`, from where stage_keys put them.
  const auto pieces_of = [&](int64_t first, int stage, int r, bool value, uint4(&out)[kPiecesPerLane]) {
    const bool own = uses_new && first + r * kGroups + group == position;
#pragma unroll
    for (int p = 0; p < kPiecesPerLane; ++p) {
      if (own) {
        out[p] = value ? new_v[p] : new_k[p];
      } else if constexpr (kStaged) {
        out[p] = L::piece(smem, stage, r, value, p);
      } else {
        out[p] = held[r][value][p];
      }
    }
  };
  if constexpr (kStaged) stage_keys(begin, 0);
  int stage = 0;
  for (int64_t first = begin; first < end; first += step, stage ^= 1) {
    if constexpr (kStaged) {
      if (first + step < end) {
        stage_keys(first + step, stage ^ 1);
      } else {
        __pipeline_commit();
      }
      __pipeline_wait_prior(1);
    } else {
      stage_keys(first, 0);
    }
    // The scores of the rounds first, then one rescale of each running softmax for all of them: rescaling the
    // G x kDims accumulators at every key cost more than the products.
    float scores[kRoundsInFlight][G];
#pragma unroll
    for (int r = 0; r < kRoundsInFlight; ++r) {
      const bool active = first + r * kGroups + group < end;
#pragma unroll
      for (int g = 0; g < G; ++g) scores[r][g] = 0.f;
      if (active) {
        uint4 k_pieces[kPiecesPerLane];
        pieces_of(first, stage, r, false, k_pieces);
        const T* k_values = reinterpret_cast<const T*>(k_pieces);
#pragma unroll
        for (int i = 0; i < kDims; ++i) {
          const float k = to_float(k_values[i]);
#pragma unroll
          for (int g = 0; g < G; ++g) scores[r][g] += q[g][i] * k;
        }
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        for (int offset = kLanes / 2; offset > 0; offset >>= 1)
          scores[r][g] += __shfl_xor_sync(group_mask<kLanes>(), scores[r][g], offset);
        if (!active) scores[r][g] = -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float new_max = running_max[g];
#pragma unroll
      for (int r = 0; r < kRoundsInFlight; ++r) new_max = fmaxf(new_max, scores[r][g]);
      if (new_max == -INFINITY) continue;  // no key of this group in these rounds, nor before
      const float rescale = exp2f(running_max[g] - new_max);  // 0 for the group's first keys
      sum[g] *= rescale;
#pragma unroll
      for (int i = 0; i < kDims; ++i) acc[g][i] *= rescale;
      running_max[g] = new_max;
    }
#pragma unroll
    for (int r = 0; r < kRoundsInFlight; ++r) {
      if (first + r * kGroups + group >= end)
        break;  // this round's values were not copied, nor the later ones'
      uint4 v_pieces[kPiecesPerLane];
      pieces_of(first, stage, r, true, v_pieces);
      const T* v_values = reinterpret_cast<const T*>(v_pieces);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float p = exp2f(scores[r][g] - running_max[g]);
        sum[g] += p;
        const float weight = round_to<T>(p);
#pragma unroll
        for (int i = 0; i < kDims; ++i) acc[g][i] += weight * to_float(v_values[i]);
      }
    }
  }
  if constexpr (kStaged) {
    __pipeline_wait_prior(0);
    __syncthreads();  // every thread is done with its staged pieces: the merge reuses their memory
  }
  PartStates<D, G, kGroups>& parts = *reinterpret_cast<PartStates<D, G, kGroups>*>(smem);
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (sub == 0) {
      parts.max[group][g] = running_max[g];
      parts.sum[group][g] = sum[g];
    }
#pragma unroll
    for (int i = 0; i < kDims; ++i) parts.acc[group][g][sub * kDims + i] = acc[g][i];
  }
  __syncthreads();
  finish_split<T>(a, parts, row, h0, split, splits, partial, arrivals);
}

// The group-tiles kernel's shared memory: each warp's stages of a tile of keys and one of values (rows padded
// by 16 bytes, so that the eight rows of an ldmatrix fall in different banks), reused for the merge of the
// warps' partial softmaxes once every warp is done with its tiles.
constexpr int kGroupKeys = 16;   // keys of a warp's tile
constexpr int kGroupStages = 2;  // a warp's next tile copies while it uses this one
template <typename T, int D, int G>
struct GroupTileLayout {
  static constexpr int kLd = D + 8;
  static constexpr size_t kTile = sizeof(T) * kGroupKeys * kLd;
  static constexpr size_t kWarp = 2 * kGroupStages * kTile;
  static constexpr size_t kStaged = kSplitWarps * kWarp;
  static constexpr size_t kMerge = sizeof(PartStates<D, G, kSplitWarps>);
  static constexpr size_t kBytes = kStaged > kMerge ? kStaged : kMerge;
  __device__ static T* tile(unsigned char* smem, int warp, int stage, bool values) {
    return reinterpret_cast<T*>(smem + warp * kWarp + (2 * stage + values) * kTile);
  }
};

// Decode over GQA groups on the tensor cores: one block per (row, kv head) and split blockIdx.y of the row's
// keys, the kv head's G query heads the first G rows of one 16-row fragment, so that q k^T and p v of a tile
// of keys are mma.sync products (rows past G are zeros, computed and dropped). The split-rows kernel spends
// G dot products, their shuffles and G softmax updates of a key on the CUDA cores, which bound it where many
// rows fill the device (ncu, engine's 8B steps: a third of DRAM's rate). Each warp takes every fourth tile of
// kGroupKeys keys of the split, copied into its own stages (cp.async, a lane a 16-byte piece, whole rows
// contiguous), the next tile copying while it uses this one; its softmax is flash attention 2's as in
// tiles_kernel, and the warps merge as the split-rows kernel's lane groups do.
template <typename T, int D, int G>
__global__ void __launch_bounds__(kSplitWarps * 32)
    group_tiles_kernel(PagedAttentionArgs a, float* partial, unsigned* arrivals) {
#if __CUDA_ARCH__ >= 800
  using L = GroupTileLayout<T, D, G>;
  constexpr int kPiece = 16 / sizeof(T), kRowPieces = D / kPiece, kRowsAPass = 32 / kRowPieces;
  extern __shared__ __align__(128) unsigned char smem[];
  wait_for_previous_kernel();

  const int64_t row = blockIdx.x / a.kv_heads, kv_head = blockIdx.x % a.kv_heads, h0 = kv_head * G;
  const int split = blockIdx.y, splits = gridDim.y;
  const SplitKeys keys = split_keys(a, row, split, splits);
  if (keys.seq == a.num_seqs) return;
  const int64_t begin = keys.begin, end = keys.end;
  const int64_t tiles = max(int64_t{0}, (end - begin + kGroupKeys - 1) / kGroupKeys);
  const int32_t* blocks = keys.blocks;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = fragment_group(), c = fragment_pair();

  // Row g of the fragments is query head h0 + g; rows from G on are zeros.
  const T* q = static_cast<const T*>(a.q) + (row * a.heads + h0 + g) * D;
  FragA q_frags[D / 16];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const bool real = g < G;
    q_frags[kk] = {{real ? *reinterpret_cast<const uint32_t*>(q + kk * 16 + c) : 0u, 0u,
                    real ? *reinterpret_cast<const uint32_t*>(q + kk * 16 + c + 8) : 0u, 0u}};
  }
  // Tile t's keys and values into `stage`: lane l finds key l's cache entry, and each pass copies whole rows
  // of kRowsAPass keys, a lane a piece. Keys past the split are zeros (a value of garbage times a weight of 0
  // could be NaN).
  const auto start_tile = [&](int64_t t, int stage) {
    const int64_t j = begin + t * kGroupKeys + lane;
    const int64_t entry = lane < kGroupKeys && j < end ? cache_offset(a, blocks, j, kv_head) : -1;
    T* k_tile = L::tile(smem, warp, stage, false);
    T* v_tile = L::tile(smem, warp, stage, true);
#pragma unroll
    for (int pass = 0; pass < kGroupKeys / kRowsAPass; ++pass) {
      const int r = pass * kRowsAPass + lane / kRowPieces, at = r * L::kLd + lane % kRowPieces * kPiece;
      const int64_t from = __shfl_sync(~0u, entry, r);
      if (from >= 0) {
        __pipeline_memcpy_async(k_tile + at,
                                static_cast<const T*>(a.cache_k) + from + lane % kRowPieces * kPiece, 16);
        __pipeline_memcpy_async(v_tile + at,
                                static_cast<const T*>(a.cache_v) + from + lane % kRowPieces * kPiece, 16);
      } else {
        *reinterpret_cast<uint4*>(k_tile + at) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(v_tile + at) = make_uint4(0, 0, 0, 0);
      }
    }
    __pipeline_commit();
  };

  float row_max = -INFINITY, row_sum = 0.f;  // of fragment row g; row_sum: this lane's columns only
  FragC out[D / 8] = {};
  if (warp < tiles) start_tile(warp, 0);
  int stage = 0;
  for (int64_t t = warp; t < tiles; t += kSplitWarps, stage ^= 1) {
    if (t + kSplitWarps < tiles) {
      start_tile(t + kSplitWarps, stage ^ 1);
    } else {
      __pipeline_commit();
    }
    __pipeline_wait_prior(1);
    __syncwarp();  // every lane's pieces of this tile are in
    const T* k_tile = L::tile(smem, warp, stage, false);
    FragC scores[kGroupKeys / 8];
    products_with<T, D>(
        scores, [&](int kk) { return q_frags[kk]; }, k_tile, L::kLd);
    const int64_t j0 = begin + t * kGroupKeys;
    const float scale = a.scale * kLog2e;  // the softmax in base 2
    float new_max = row_max;
#pragma unroll
    for (int n = 0; n < kGroupKeys / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        scores[n].x[e] = j0 + n * 8 + c + e < end ? scores[n].x[e] * scale : -INFINITY;
        new_max = fmaxf(new_max, scores[n].x[e]);
      }
    }
    new_max = across_row_lanes<Max>(new_max);  // finite: key j0 is the split's, so every row sees it
    const float rescale = exp2f(row_max - new_max);
    row_max = new_max;
    row_sum *= rescale;
#pragma unroll
    for (int n = 0; n < kGroupKeys / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        scores[n].x[e] = exp2f(scores[n].x[e] - new_max);
        row_sum += scores[n].x[e];
        scores[n].x[2 + e] = 0.f;  // fragment row g + 8: no head
      }
    }
    const FragA weights[1] = {as_operand<T>(scores[0], scores[1])};
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      out[dt].x[0] *= rescale;
      out[dt].x[1] *= rescale;
    }
    weigh_rows<T, D, 1>(out, weights, L::tile(smem, warp, stage, true), L::kLd);
    __syncwarp();  // every lane is done with this stage before the next round refills it
  }
  row_sum = across_row_lanes<Sum>(row_sum);
  __pipeline_wait_prior(0);
  __syncthreads();  // every warp is done with its stages: the merge reuses their memory
  PartStates<D, G, kSplitWarps>& parts = *reinterpret_cast<PartStates<D, G, kSplitWarps>*>(smem);
  if (g < G) {
    if (c == 0) {
      parts.max[warp][g] = row_max;
      parts.sum[warp][g] = row_sum;
    }
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      parts.acc[warp][g][dt * 8 + c] = out[dt].x[0];
      parts.acc[warp][g][dt * 8 + c + 1] = out[dt].x[1];
    }
  }
  __syncthreads();
  finish_split<T>(a, parts, row, h0, split, splits, partial, arrivals);
#else
  __trap();  // built only for devices with bf16 tensor cores (compute capability 8.0 and up)
#endif
}

constexpr int kTileKeys = kTileRows;

// Shared memory of the tile kernel: the query tiles of its G heads and one tile of keys and one of values,
// rows kTileLd apart. Scores, weights, the output accumulators and (up to head size 128) the query fragments
// stay in registers.
template <typename T, int D, int G>
struct TileLayout {
  static constexpr int kLd = kTileLd<D>;  // q, k and v rows (T)
  static constexpr size_t kQ = 0;
  static constexpr size_t kK = kQ + sizeof(T) * G * kTileRows * kLd;
  static constexpr size_t kV = kK + sizeof(T) * kTileKeys * kLd;
  static constexpr size_t kBytes = kV + sizeof(T) * kTileKeys * kLd;
};

// Flash attention 2's forward for one block of 64 query rows of a sequence and G heads of one kv head, four
// warps of 16 rows a head: each warp keeps its query fragments (up to head size 128), scores, weights and
// output in registers (mma.sync), and reads keys and values from shared memory (ldmatrix), where one load of
// a tile serves the G heads (the kernel is bound by what it reads from L2 otherwise). A tile's values load
// while its scores are computed and the next tile's keys while its values are summed. Masks are applied only
// to tiles that some row of the warp sees in part; a warp skips the tiles none of its rows sees.
// Two heads a block ask for two blocks a multiprocessor; one head sets no minimum (0), which leaves head size
// 256 its 244 registers (a minimum of three spilled it).
template <typename T, int D, int G>
__global__ void __launch_bounds__(kTileWarps * 32 * G, G == 1 ? 0 : 2) tiles_kernel(PagedAttentionArgs a) {
  wait_for_previous_kernel();
#if __CUDA_ARCH__ >= 800
  using L = TileLayout<T, D, G>;
  constexpr int kThreads = kTileWarps * 32 * G;
  // With two heads the fragments come from shared memory, so that two blocks fit a multiprocessor's
  // registers; with one, 256 would leave too few registers for the output.
  constexpr bool kQInRegisters = D <= 128 && G == 1;
  extern __shared__ __align__(128) unsigned char smem[];
  T* q_tile = reinterpret_cast<T*>(smem + L::kQ);
  T* k_tile = reinterpret_cast<T*>(smem + L::kK);
  T* v_tile = reinterpret_cast<T*>(smem + L::kV);
  __shared__ int key_bounds[2];

  // The last tiles of a sequence see the most keys: they start first, so that the grid's tail is light.
  int64_t s = 0, tile = 0;
  if (!find_tile(a.query_start, a.num_seqs, gridDim.x - 1 - blockIdx.x, s, tile)) return;
  const int64_t first_head = blockIdx.y * G, kv_head = first_head / (a.heads / a.kv_heads);
  const int64_t row0 = a.query_start[s] + tile * kTileRows;
  const int rows = static_cast<int>(min(static_cast<int64_t>(kTileRows), a.query_start[s + 1] - row0));
  const int32_t* blocks = a.block_tables + s * a.max_blocks;
  const T* q = static_cast<const T*>(a.q);
  start_head_rows<T, D, G, kThreads>(q_tile, q, row0, rows, a.heads, first_head);
  if (threadIdx.x == 0) {
    key_bounds[0] = INT32_MAX;
    key_bounds[1] = -1;
  }
  __syncthreads();
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    const KeyRange range = key_range(a, s, a.positions[row0 + r]);
    atomicMin(&key_bounds[0], static_cast<int>(range.first));
    atomicMax(&key_bounds[1], static_cast<int>(range.last));
  }
  __syncthreads();
  const int first = key_bounds[0], last = key_bounds[1];
  const auto keys_from = [&](const void* cache, int j0) {
    return [=, &a](int r) { return j0 + r <= last ? cache_entry<T>(a, cache, blocks, j0 + r, kv_head) : nullptr; };
  };
  if (first <= last) start_rows_load<T, D, kTileKeys, kThreads>(k_tile, L::kLd, keys_from(a.cache_k, first));
  wait_rows_loads();

  const int warp = threadIdx.x / 32, head_of_warp = warp / kTileWarps, c = fragment_pair();
  const int warp_row = warp % kTileWarps * 16, h = static_cast<int>(first_head) + head_of_warp;
  const T* warp_q = q_tile + (head_of_warp * kTileRows + warp_row) * L::kLd;
  bool real[2];
  int row_first[2], row_last[2];
  for (int half = 0; half < 2; ++half) {
    const int r = warp_row + fragment_group() + 8 * half;
    real[half] = r < rows;
    const KeyRange range = real[half] ? key_range(a, s, a.positions[row0 + r]) : KeyRange{0, -1};
    row_first[half] = static_cast<int>(range.first);
    row_last[half] = static_cast<int>(range.last);
  }
  const WarpKeys keys(real, row_first, row_last);

  FragA q_frags[kQInRegisters ? D / 16 : 1];
  if constexpr (kQInRegisters) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) q_frags[kk] = load_a(warp_q + kk * 16, L::kLd);
  }
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};  // row_sum: this lane's columns only
  FragC out[D / 8] = {};
  for (int j0 = first; j0 <= last; j0 += kTileKeys) {
    start_rows_load<T, D, kTileKeys, kThreads>(v_tile, L::kLd, keys_from(a.cache_v, j0));
    __pipeline_commit();
    const bool active = keys.some(j0, kTileKeys);
    FragA weights[kTileKeys / 16];
    if (active) {
      FragC scores[kTileKeys / 8];
      products_with<T, D>(
          scores,
          [&](int kk) {
            if constexpr (kQInRegisters) {
              return q_frags[kk];
            } else {
              return load_a(warp_q + kk * 16, L::kLd);
            }
          },
          k_tile, L::kLd);
      const bool whole = keys.every(j0, kTileKeys);
      const float scale = a.scale * kLog2e;  // the softmax in base 2
      float new_max[2] = {row_max[0], row_max[1]};
#pragma unroll
      for (int t = 0; t < kTileKeys / 8; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int half = e / 2, j = j0 + t * 8 + c + e % 2;
          const bool seen = whole || keys.sees(half, j);
          scores[t].x[e] = seen ? scores[t].x[e] * scale : -INFINITY;
          new_max[half] = fmaxf(new_max[half], scores[t].x[e]);
        }
      }
      float rescale[2];
      for (int half = 0; half < 2; ++half) {
        new_max[half] = across_row_lanes<Max>(new_max[half]);
        rescale[half] = new_max[half] == -INFINITY ? 1.f : exp2f(row_max[half] - new_max[half]);
        row_max[half] = new_max[half];
        if (new_max[half] == -INFINITY) new_max[half] = 0.f;  // no key yet: every weight is 2^-inf = 0
        row_sum[half] *= rescale[half];
      }
#pragma unroll
      for (int t = 0; t < kTileKeys / 8; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          scores[t].x[e] = exp2f(scores[t].x[e] - new_max[e / 2]);
          row_sum[e / 2] += scores[t].x[e];
        }
      }
#pragma unroll
      for (int n = 0; n < kTileKeys / 16; ++n) weights[n] = as_operand<T>(scores[2 * n], scores[2 * n + 1]);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) out[dt].x[e] *= rescale[e / 2];
      }
    }
    wait_rows_loads();  // the values are in; every warp is done with the keys
    if (j0 + kTileKeys <= last)
      start_rows_load<T, D, kTileKeys, kThreads>(k_tile, L::kLd, keys_from(a.cache_k, j0 + kTileKeys));
    __pipeline_commit();
    if (active) weigh_rows<T, D, kTileKeys / 16>(out, weights, v_tile, L::kLd);
    wait_rows_loads();  // the next keys are in; every warp is done with the values
  }
  for (int half = 0; half < 2; ++half) {
    const int r = warp_row + fragment_group() + 8 * half;
    const float total = across_row_lanes<Sum>(row_sum[half]);
    if (r >= rows) continue;
    if (a.lse && c == 0) a.lse[(row0 + r) * a.heads + h] = (row_max[half] + log2f(total)) * kLn2;
    const float inv = total > 0.f ? 1.f / total : 0.f;
    T* o = static_cast<T*>(a.out) + ((row0 + r) * a.heads + h) * D + c;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[dt * 8] = from_float<T>(out[dt].x[2 * half] * inv);
      o[dt * 8 + 1] = from_float<T>(out[dt].x[2 * half + 1] * inv);
    }
  }
#else
  __trap();  // built only for devices with bf16 tensor cores (compute capability 8.0 and up)
#endif
}

// Tiles pay when sequences bring several query rows each; one or two (decode) go to the split rows. Only the
// tiles keep the log-sum-exp.
template <typename T>
bool uses_tiles(const PagedAttentionArgs& a) {
  return sizeof(T) == 2 && lanes_hold(a.head_dim) && (a.num_rows > 2 * a.num_seqs || a.lse);
}

// The query heads one split block serves: GQA's group (heads / kv_heads) when it is 2, 4 or 8 and the grouped
// blocks still give every multiprocessor one, else 1. Many rows (batched decode) are bound by reading the cache,
// which grouping reads once for the group; a few rows are bound by each block's chain of dependent steps, which
// grouping makes G times longer (batch-1 decode of the Qwen3-8B shape went from 4.34 to 4.65 ms a step).
int heads_per_block(const PagedAttentionArgs& a) {
  static const int64_t sms = multiprocessors();
  const int64_t group = a.heads / a.kv_heads;
  const bool fills = a.num_rows * a.kv_heads >= sms;
  return fills && (group == 2 || group == 4 || group == 8) ? static_cast<int>(group) : 1;
}

// Which decode steps the group-tiles kernel takes: those whose rows fill the device with GQA groups
// (heads_per_block gathers them; the default), every one it can (TFM_CUDA_GROUP_TILES=always) or none (=never),
// so that each rule can be measured against the others. Decided on the first call.
enum class GroupTilesRule { filling, always, never };
GroupTilesRule group_tiles_rule() {
  static const GroupTilesRule rule = [] {
    const char* value = std::getenv("TFM_CUDA_GROUP_TILES");
    const std::string_view chosen = value ? value : "";
    if (chosen == "always") return GroupTilesRule::always;
    return chosen == "never" ? GroupTilesRule::never : GroupTilesRule::filling;
  }();
  return rule;
}

// The group-tiles kernel takes decode steps of bf16 and fp16 where a kv head's query heads fit one fragment's
// rows and its keys and values the warps' stages: groups of 1, 2, 4 or 8 heads, head sizes 64 and 128 (256
// would hold 128 output accumulators a lane).
template <typename T>
bool uses_group_tiles(const PagedAttentionArgs& a) {
  const int64_t group = a.heads / a.kv_heads;
  const bool takes = sizeof(T) == 2 && !uses_tiles<T>(a) && (a.head_dim == 64 || a.head_dim == 128) &&
                     (group == 1 || group == 2 || group == 4 || group == 8);
  switch (group_tiles_rule()) {
    case GroupTilesRule::always:
      return takes;
    case GroupTilesRule::never:
      return false;
    default:
      return takes && heads_per_block(a) > 1;
  }
}

// A decode launch's blocks before its splits: one a row and kv head (group tiles), or a row and
// heads_per_block heads (split rows).
template <typename T>
int64_t decode_blocks(const PagedAttentionArgs& a) {
  return a.num_rows * (uses_group_tiles<T>(a) ? a.kv_heads : a.heads / heads_per_block(a));
}

// Splits of each row's keys: enough blocks for two per multiprocessor, none shorter than kMinSplitKeys of the
// longest context the block tables hold. Depends only on the shapes, so a captured graph keeps it valid.
template <typename T>
int64_t split_count(const PagedAttentionArgs& a) {
  static const int64_t sms = multiprocessors();
  const int64_t blocks = max(int64_t{1}, decode_blocks<T>(a));
  const int64_t by_length = (a.max_blocks * a.block_size + kMinSplitKeys - 1) / kMinSplitKeys;
  const int64_t by_device = (2 * sms + blocks - 1) / blocks;
  return std::clamp<int64_t>(std::min(by_length, by_device), 1, kMaxSplits);
}

template <typename T, int D, bool FromQkv>
void launch_split_rows(const PagedAttentionArgs& a, const QkvRopeCacheArgs& in, float* partial) {
  const int64_t splits = split_count<T>(a);
  with_constant<1, 2, 4, 8>(heads_per_block(a), [&](auto heads) {
    const int64_t blocks = a.num_rows * a.heads / heads();
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(splits));
    unsigned* arrivals = splits > 1 ? arrival_counters(blocks, "paged_attention") : nullptr;
    constexpr size_t bytes = SplitLayout<T, D, heads()>::kBytes;
    static const bool configured = [&] {
      allow_shared_bytes(split_rows_kernel<T, D, heads(), FromQkv>, bytes);
      return true;
    }();
    (void)configured;
    launch_chained(split_rows_kernel<T, D, heads(), FromQkv>, grid, kSplitWarps * 32, bytes, a, in, partial,
                   arrivals);
  });
  check_launch(FromQkv ? "qkv_attention (split rows)" : "paged_attention (split rows)");
}

template <typename T, int D>
void launch_group_tiles(const PagedAttentionArgs& a, float* partial) {
  const int64_t splits = split_count<T>(a);
  with_constant<1, 2, 4, 8>(a.heads / a.kv_heads, [&](auto heads) {
    const int64_t blocks = a.num_rows * a.kv_heads;
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(splits));
    unsigned* arrivals = splits > 1 ? arrival_counters(blocks, "paged_attention") : nullptr;
    constexpr size_t bytes = GroupTileLayout<T, D, heads()>::kBytes;
    static const bool configured = [&] {
      allow_shared_bytes(group_tiles_kernel<T, D, heads()>, bytes);
      return true;
    }();
    (void)configured;
    launch_chained(group_tiles_kernel<T, D, heads()>, grid, kSplitWarps * 32, bytes, a, partial, arrivals);
  });
  check_launch("paged_attention (group tiles)");
}

template <typename T, int D>
void launch_tiles(const PagedAttentionArgs& a) {
  const auto launch = [&](auto heads) {
    constexpr int G = heads();
    constexpr size_t bytes = TileLayout<T, D, G>::kBytes;
    static const bool configured = [] {
      allow_shared_bytes(tiles_kernel<T, D, G>, bytes);
      return true;
    }();
    (void)configured;
    const dim3 grid(tile_grid(a.num_rows, a.num_seqs), static_cast<unsigned>(a.heads / G));
    launch_chained(tiles_kernel<T, D, G>, grid, kTileWarps * 32 * G, bytes, a);
  };
  if constexpr (D <= 128) {  // two heads of 256 would not fit a multiprocessor's registers
    with_constant<1, 2>(tile_heads(a.heads, a.kv_heads), launch);
  } else {
    launch(std::integral_constant<int, 1>());
  }
  check_launch("paged_attention (tiles)");
}

}  // namespace

template <typename T>
int64_t paged_attention_workspace(const PagedAttentionArgs& a, bool eager) {
  if (eager || !lanes_hold(a.head_dim) || uses_tiles<T>(a)) return 0;
  const int64_t splits = split_count<T>(a);
  return splits > 1 ? a.num_rows * a.heads * splits * (a.head_dim + 2) : 0;
}

template <typename T>
bool paged_attention_keeps_lse(const PagedAttentionArgs& a) {
  return sizeof(T) == 2 && (a.head_dim == 64 || a.head_dim == 128);
}

template <typename T>
void paged_attention(const PagedAttentionArgs& args, bool eager, float* workspace) {
  check(
      !args.lse || (!eager && paged_attention_keeps_lse<T>(args)),
      "CUDA kernel paged_attention keeps the log-sum-exp only in its flash form, in 16-bit dtypes, for head "
      "sizes 64 and 128 (head size ",
      args.head_dim, ")");
  if (args.num_rows * args.heads == 0) return;
  using Element = device_t<T>;
  if constexpr (sizeof(T) == 2) {
    if (!eager && uses_tiles<T>(args)) {
      with_head_dim(args.head_dim, [&](auto d) { launch_tiles<Element, d()>(args); });
      return;
    }
    if (!eager && uses_group_tiles<T>(args)) {
      with_constant<64, 128>(args.head_dim,
                             [&](auto d) { launch_group_tiles<Element, d()>(args, workspace); });
      return;
    }
  }
  if (!eager && lanes_hold(args.head_dim)) {
    with_head_dim(args.head_dim,
                  [&](auto d) { launch_split_rows<Element, d(), false>(args, {}, workspace); });
    return;
  }
  if (args.head_dim > kThreads * kDimsPerThread) {
    throw_error("CUDA kernel paged_attention: head_dim ", args.head_dim, " is over its ",
                kThreads * kDimsPerThread);
  }
  const unsigned blocks = static_cast<unsigned>(args.num_rows * args.heads);
  const size_t shared = static_cast<size_t>(args.head_dim) * sizeof(float);
  if (eager) {
    launch_chained(rows_kernel<Element, true>, blocks, kThreads, shared, args);
  } else {
    launch_chained(rows_kernel<Element, false>, blocks, kThreads, shared, args);
  }
  check_launch("paged_attention");
}

template <typename T>
bool qkv_attention_takes(const QkvRopeCacheArgs& in, const PagedAttentionArgs& a) {
  return !uses_tiles<T>(a) && !uses_group_tiles<T>(a) && wide_access<T>(0, in.qkv) &&
         lanes_rotate(sizeof(T), a.head_dim, in.rot);
}

template <typename T>
void qkv_attention(const QkvRopeCacheArgs& in, const PagedAttentionArgs& args, float* workspace) {
  if (args.num_rows * args.heads == 0) return;
  with_head_dim(args.head_dim,
                [&](auto d) { launch_split_rows<device_t<T>, d(), true>(args, in, workspace); });
}

#define TFM_ATTENTION_LAUNCHERS(T)                                                          \
  template int64_t paged_attention_workspace<T>(const PagedAttentionArgs&, bool);           \
  template void paged_attention<T>(const PagedAttentionArgs&, bool, float*);                \
  template bool paged_attention_keeps_lse<T>(const PagedAttentionArgs&);                    \
  template bool qkv_attention_takes<T>(const QkvRopeCacheArgs&, const PagedAttentionArgs&); \
  template void qkv_attention<T>(const QkvRopeCacheArgs&, const PagedAttentionArgs&, float*);
TFM_ATTENTION_LAUNCHERS(float)
TFM_ATTENTION_LAUNCHERS(bfloat16)
TFM_ATTENTION_LAUNCHERS(float16)

}  // namespace tfm::cuda::launch

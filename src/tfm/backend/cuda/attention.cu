// Paged attention: one block per (query row, head). Keys are visited in blocks of kKeyBlock, as the CPU's
// kernels.cpp (after torch's CPU kernel) takes them: each thread scores kKeyBlock / kThreads keys against the
// row's query (kept in shared memory as float32), the block reduces them, and each thread sums its share of
// the head dimensions over the block's values.
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"

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

// Eager materialises the softmax as Transformers' eager attention: every score rounded to T (q k^T, then
// times scale), the row's maximum and sum found in a first pass, each probability rounded to T. Otherwise one
// pass keeps float32 scores; each weight is exp(score - the maximum so far, this block's included), rounded
// to T where it multiplies the values while the denominator sums it unrounded, and what was summed is
// rescaled whenever a block raises the maximum (sdpa, flash).
template <typename T, bool Eager>
__global__ void paged_attention_kernel(PagedAttentionArgs a) {
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

  auto cache_row = [&](const void* cache, int64_t j) {
    const int64_t block = blocks[j / a.block_size];
    return static_cast<const T*>(cache) +
           ((block * a.block_size + j % a.block_size) * a.kv_heads + kv_head) * D;
  };
  // The scores of this thread's keys of the block at j0 (-infinity past the last key), and their maximum.
  auto score_block = [&](int64_t j0, float(&scores)[kKeysPerThread]) {
    float block_max = -INFINITY;
    for (int k = 0; k < kKeysPerThread; ++k) {
      const int64_t j = j0 + threadIdx.x + k * kThreads;
      float score = -INFINITY;
      if (j <= last) {
        const T* key = cache_row(a.cache_k, j);
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
      const T* v = cache_row(a.cache_v, j0 + t);
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

}  // namespace

template <typename T>
void paged_attention(const PagedAttentionArgs& args, bool eager) {
  if (args.head_dim > kThreads * kDimsPerThread) {
    throw_error("CUDA kernel paged_attention: head_dim ", args.head_dim, " is over its ",
                kThreads * kDimsPerThread);
  }
  if (args.num_rows * args.heads == 0) return;
  const unsigned blocks = static_cast<unsigned>(args.num_rows * args.heads);
  const size_t shared = static_cast<size_t>(args.head_dim) * sizeof(float);
  using Element = device_t<T>;
  if (eager) {
    paged_attention_kernel<Element, true><<<blocks, kThreads, shared>>>(args);
  } else {
    paged_attention_kernel<Element, false><<<blocks, kThreads, shared>>>(args);
  }
  check_launch("paged_attention");
}

template void paged_attention<float>(const PagedAttentionArgs&, bool);
template void paged_attention<bfloat16>(const PagedAttentionArgs&, bool);
template void paged_attention<float16>(const PagedAttentionArgs&, bool);

}  // namespace tfm::cuda::launch

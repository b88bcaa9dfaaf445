// The arguments of a paged-attention kernel over raw device pointers, shared by the backends whose memory is
// addressed by pointers (cpu, cuda). The float buffers are untyped: each kernel reads them as its dtype's
// storage type. Kept to C++17 so that .cu files can include it.
#pragma once

#include <cstdint>

namespace tfm {

struct PagedAttentionArgs {
  const void* q;                // (T, heads, head_dim), already rotated
  const void* cache_k;          // (blocks, block_size, kv_heads, head_dim)
  const void* cache_v;          // (blocks, block_size, kv_heads, head_dim)
  const int32_t* query_start;   // (S + 1): rows of sequence s are [query_start[s], query_start[s + 1])
  const int32_t* context_lens;  // (S): tokens of sequence s in the cache, this step's included
  const int32_t* block_tables;  // (S, max_blocks): cache block of each block_size tokens of sequence s
  const int32_t* positions;     // (T): position of each query row in its sequence
  int64_t num_rows, num_seqs, heads, kv_heads, head_dim, block_size, max_blocks;
  float scale;
  int64_t window;  // 0: full causal; else a row sees its own position and the window-1 before
  void* out;       // (T, heads, head_dim)
  float* lse = nullptr;  // (T, heads) or null: each row's log-sum-exp of its scaled scores, where kept
};

}  // namespace tfm

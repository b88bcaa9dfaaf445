// One forward step's input: the new tokens of every sequence, flattened into rows (a ragged batch), and where
// each sequence's keys and values live in the paged cache. Prefill, decode and a mix of both are the same
// call.
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/model/kv_cache.h"

namespace tfm {

struct ForwardBatch {
  std::vector<int32_t> token_ids;     // (T)
  std::vector<int32_t> positions;     // (T)
  std::vector<int32_t> query_start;   // (S + 1): rows of sequence s are [query_start[s], query_start[s + 1])
  std::vector<int32_t> context_lens;  // (S): tokens in the cache once this step is written
  std::vector<int32_t> block_tables;  // (S, max_blocks), unused entries -1
  int64_t max_blocks = 0;
  std::vector<int32_t> slots;        // (T): cache slot of each row
  std::vector<int32_t> logits_rows;  // rows whose logits the step returns, in order
};

// Checks that a batch is consistent and fits `cache` and a vocabulary of `vocab_size`; a caller's error (an
// out-of-range id, slot or block) becomes a tfm::Error instead of a wild memory access in a kernel.
void validate(const ForwardBatch& batch, const KVCache& cache, int64_t vocab_size);

// A sequence as a BatchBuilder advances it: its cache blocks and how many tokens are cached.
struct SequenceCache {
  std::vector<int32_t> blocks;
  int64_t num_cached = 0;
};

enum class Logits { last, all };

// Builds one step's ForwardBatch, allocating cache blocks for the new tokens (an error when the pool is
// exhausted). Each added sequence's cache record is advanced past its new tokens.
class BatchBuilder {
 public:
  explicit BatchBuilder(KVCache& cache) : cache_(cache) {}
  // `want_logits` chooses between every new row's logits and only the last row's.
  void add(SequenceCache& seq, const std::vector<int64_t>& tokens, Logits want_logits);
  ForwardBatch finish();

 private:
  KVCache& cache_;
  ForwardBatch batch_;
  std::vector<std::vector<int32_t>> tables_;
};

// Returns a finished sequence's blocks to the pool.
void release(SequenceCache& seq, KVCache& cache);

}  // namespace tfm

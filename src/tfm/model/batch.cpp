#include "tfm/model/batch.h"

#include "tfm/core/error.h"

namespace tfm {

void BatchBuilder::add(SequenceCache& seq, const std::vector<int64_t>& tokens, Logits want_logits) {
  check(!tokens.empty(), "a sequence in a batch needs at least one new token");
  if (batch_.query_start.empty()) batch_.query_start.push_back(0);
  const int64_t total = seq.num_cached + static_cast<int64_t>(tokens.size());
  while (static_cast<int64_t>(seq.blocks.size()) * cache_.block_size < total) {
    const auto block = cache_.pool.allocate();
    check(block.has_value(), "the KV cache is full (", cache_.pool.num_blocks(), " blocks of ", cache_.block_size,
          " tokens)");
    seq.blocks.push_back(*block);
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t pos = seq.num_cached + static_cast<int64_t>(i);
    if (want_logits == Logits::all) batch_.logits_rows.push_back(static_cast<int32_t>(batch_.token_ids.size()));
    batch_.token_ids.push_back(static_cast<int32_t>(tokens[i]));
    batch_.positions.push_back(static_cast<int32_t>(pos));
    batch_.slots.push_back(
        static_cast<int32_t>(seq.blocks[pos / cache_.block_size] * cache_.block_size + pos % cache_.block_size));
  }
  if (want_logits == Logits::last) batch_.logits_rows.push_back(static_cast<int32_t>(batch_.token_ids.size() - 1));
  batch_.query_start.push_back(static_cast<int32_t>(batch_.token_ids.size()));
  batch_.context_lens.push_back(static_cast<int32_t>(total));
  tables_.push_back(seq.blocks);
  seq.num_cached = total;
}

ForwardBatch BatchBuilder::finish() {
  for (const auto& t : tables_) batch_.max_blocks = std::max<int64_t>(batch_.max_blocks, static_cast<int64_t>(t.size()));
  for (const auto& t : tables_) {
    batch_.block_tables.insert(batch_.block_tables.end(), t.begin(), t.end());
    batch_.block_tables.insert(batch_.block_tables.end(), static_cast<size_t>(batch_.max_blocks) - t.size(), -1);
  }
  tables_.clear();
  return std::move(batch_);
}

void release(SequenceCache& seq, KVCache& cache) {
  for (int32_t b : seq.blocks) cache.pool.release(b);
  seq.blocks.clear();
  seq.num_cached = 0;
}

}  // namespace tfm

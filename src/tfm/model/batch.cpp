#include "tfm/model/batch.h"

#include "tfm/core/error.h"

namespace tfm {

void BatchBuilder::add(SequenceCache& seq, const std::vector<int64_t>& tokens, Logits want_logits) {
  check(!tokens.empty(), "a sequence in a batch needs at least one new token");
  if (batch_.query_start.empty()) batch_.query_start.push_back(0);
  const int64_t total = seq.num_cached + static_cast<int64_t>(tokens.size());
  while (static_cast<int64_t>(seq.blocks.size()) * cache_.block_size < total) {
    const auto block = cache_.pool.allocate();
    check(block.has_value(), "the KV cache is full (", cache_.pool.num_blocks(), " blocks of ",
          cache_.block_size, " tokens)");
    seq.blocks.push_back(*block);
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t pos = seq.num_cached + static_cast<int64_t>(i);
    if (want_logits == Logits::all)
      batch_.logits_rows.push_back(static_cast<int32_t>(batch_.token_ids.size()));
    batch_.token_ids.push_back(static_cast<int32_t>(tokens[i]));
    batch_.positions.push_back(static_cast<int32_t>(pos));
    batch_.slots.push_back(static_cast<int32_t>(seq.blocks[pos / cache_.block_size] * cache_.block_size +
                                                pos % cache_.block_size));
  }
  if (want_logits == Logits::last)
    batch_.logits_rows.push_back(static_cast<int32_t>(batch_.token_ids.size() - 1));
  batch_.query_start.push_back(static_cast<int32_t>(batch_.token_ids.size()));
  batch_.context_lens.push_back(static_cast<int32_t>(total));
  tables_.push_back(seq.blocks);
  seq.num_cached = total;
}

ForwardBatch BatchBuilder::finish() {
  for (const auto& t : tables_)
    batch_.max_blocks = std::max<int64_t>(batch_.max_blocks, static_cast<int64_t>(t.size()));
  for (const auto& t : tables_) {
    batch_.block_tables.insert(batch_.block_tables.end(), t.begin(), t.end());
    batch_.block_tables.insert(batch_.block_tables.end(), static_cast<size_t>(batch_.max_blocks) - t.size(),
                               -1);
  }
  tables_.clear();
  return std::move(batch_);
}

void validate(const ForwardBatch& b, const KVCache& cache, int64_t vocab_size) {
  const size_t T = b.token_ids.size(), S = b.context_lens.size();
  check(T > 0 && b.positions.size() == T && b.slots.size() == T && b.query_start.size() == S + 1 &&
            b.query_start.front() == 0 && static_cast<size_t>(b.query_start.back()) == T &&
            b.block_tables.size() == S * static_cast<size_t>(b.max_blocks),
        "forward batch: inconsistent sizes");
  const int64_t slots = static_cast<int64_t>(cache.pool.num_blocks()) * cache.block_size;
  for (size_t t = 0; t < T; ++t) {
    check(b.token_ids[t] >= 0 && b.token_ids[t] < vocab_size, "token id ", b.token_ids[t],
          " is outside the vocabulary (size ", vocab_size, ")");
    check(b.slots[t] >= 0 && b.slots[t] < slots, "forward batch: slot ", b.slots[t], " is outside the cache");
  }
  for (size_t s = 0; s < S; ++s) {
    check(b.query_start[s] <= b.query_start[s + 1], "forward batch: query_start is not increasing");
    check(b.context_lens[s] >= b.query_start[s + 1] - b.query_start[s] &&
              b.context_lens[s] <= b.max_blocks * cache.block_size,
          "forward batch: sequence ", s, " has a context of ", b.context_lens[s], " tokens");
    for (int64_t j = 0; j < blocks_for(b.context_lens[s], cache.block_size); ++j) {
      const int32_t block = b.block_tables[s * static_cast<size_t>(b.max_blocks) + static_cast<size_t>(j)];
      check(block >= 0 && block < cache.pool.num_blocks(), "forward batch: block ", block,
            " is outside the cache");
    }
    for (int32_t r = b.query_start[s]; r < b.query_start[s + 1]; ++r) {
      check(b.positions[r] >= 0 && b.positions[r] < b.context_lens[s], "forward batch: position ",
            b.positions[r], " is outside its sequence");
    }
  }
  for (int32_t r : b.logits_rows) {
    check(r >= 0 && static_cast<size_t>(r) < T, "forward batch: logits row ", r, " is outside the batch");
  }
}

void release(SequenceCache& seq, KVCache& cache) {
  for (int32_t b : seq.blocks) cache.pool.release(b);
  seq.blocks.clear();
  seq.num_cached = 0;
}

}  // namespace tfm

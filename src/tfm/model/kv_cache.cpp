#include "tfm/model/kv_cache.h"

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"

namespace tfm {

BlockPool::BlockPool(int32_t num_blocks) : num_blocks_(num_blocks) {
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::optional<int32_t> BlockPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t b = free_.back();
  free_.pop_back();
  return b;
}

void BlockPool::release(int32_t block) {
  check(block >= 0 && block < num_blocks_, "release of block ", block, " outside the pool");
  free_.push_back(block);
}

KVCache KVCache::create(const ModelConfig& config, int32_t num_blocks, int64_t block_size, DType dtype,
                        Device device) {
  check(num_blocks > 0 && block_size > 0, "a KV cache needs blocks, got ", num_blocks, " of ", block_size);
  KVCache cache;
  cache.block_size = block_size;
  cache.pool = BlockPool(num_blocks);
  const Shape shape{num_blocks, block_size, config.num_key_value_heads, config.head_dim};
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    cache.layers.push_back({empty(shape, dtype, device), empty(shape, dtype, device)});
  }
  return cache;
}

}  // namespace tfm

// The paged KV cache: fixed-size blocks from one pool, per layer a key and a value tensor of
// (num_blocks, block_size, kv_heads, head_dim) in the model's dtype. A sequence owns a list of blocks; its
// token j lives in block blocks[j / block_size] at offset j % block_size.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "tfm/core/device.h"
#include "tfm/core/tensor.h"
#include "tfm/model/config.h"

namespace tfm {

// What a full block holds, for prefix caching: the block before it in its sequence (its id and that block's
// generation, so that a parent handed out again for other tokens no longer matches) and its tokens. Equal keys
// mean equal keys and values in every layer, since a block's keys and values depend only on the tokens up to
// and including it.
struct BlockKey {
  int32_t parent = -1;  // -1 for a sequence's first block
  uint64_t parent_generation = 0;
  std::vector<int32_t> tokens;
  bool operator==(const BlockKey&) const = default;
};

struct BlockKeyHash {
  size_t operator()(const BlockKey& key) const;
};

// Fixed-size KV blocks handed out and taken back with reference counts, so that sequences can share the blocks
// of a common prefix. A block whose count drops to zero joins the free queue but keeps its key, if it has one,
// until it is handed out again, least recently freed first: meanwhile acquire_cached can take it back.
class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);
  // A free block with a count of one (the least recently freed, its key forgotten); nullopt when none is free.
  std::optional<int32_t> allocate();
  // One reference fewer; at zero the block joins the free queue.
  void release(int32_t block);
  // Records a full block's content so that later sequences with the same prefix find it.
  void set_key(int32_t block, BlockKey key);
  // The block holding `key` with one reference more (off the free queue if it was free), or nullopt.
  std::optional<int32_t> acquire_cached(const BlockKey& key);
  // Increments each time the block is handed out for new content.
  uint64_t generation(int32_t block) const { return blocks_.at(static_cast<size_t>(block)).generation; }
  int32_t ref_count(int32_t block) const { return blocks_.at(static_cast<size_t>(block)).refs; }

  // Adds blocks, free, from num_blocks() up to `num_blocks`.
  void grow(int32_t num_blocks);
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t num_cached() const { return static_cast<int32_t>(cached_.size()); }

 private:
  struct Block {
    int32_t refs = 0;
    uint64_t generation = 0;
    std::optional<BlockKey> key;
    std::list<int32_t>::iterator in_free;  // valid while refs == 0
  };
  std::vector<Block> blocks_;
  std::list<int32_t> free_;  // least recently freed first
  std::unordered_map<BlockKey, int32_t, BlockKeyHash> cached_;
};

// Blocks of `block_size` that hold `tokens` tokens of one sequence.
inline int64_t blocks_for(int64_t tokens, int64_t block_size) {
  return tokens / block_size + (tokens % block_size != 0);
}

// One layer's keys and values: (blocks, block_size, kv_heads, head_dim) each.
struct LayerCache {
  Tensor key;
  Tensor value;
};

struct KVCache {
  int64_t block_size = 0;
  std::vector<LayerCache> layers;
  BlockPool pool{0};

  // More tokens than cache slots (int32) address, or than the device has memory for, is an error naming the
  // cache's size.
  static KVCache create(const ModelConfig& config, int64_t num_blocks, int64_t block_size, DType dtype,
                        Device device);
  // Grows the cache to `num_blocks` blocks (nothing when it has that many), keeping every block's id and
  // contents, so that a cache can grow with its sequences instead of being sized for their longest length.
  void reserve(int64_t num_blocks);

 private:
  Shape block_;  // one block of one layer's keys: (1, block_size, kv_heads, head_dim)
  DType dtype_ = DType::float32;
  Device device_;
};

}  // namespace tfm

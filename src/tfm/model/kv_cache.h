// The paged KV cache: fixed-size blocks from one pool, per layer a key and a value tensor of
// (num_blocks, block_size, kv_heads, head_dim) in the model's dtype. A sequence owns a list of blocks; its
// token j lives in block blocks[j / block_size] at offset j % block_size.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tfm/core/device.h"
#include "tfm/core/tensor.h"
#include "tfm/model/config.h"

namespace tfm {

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);
  std::optional<int32_t> allocate();  // nullopt when every block is taken
  void release(int32_t block);
  // Adds the blocks from num_blocks() up to `num_blocks`, free.
  void grow(int32_t num_blocks);
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_blocks() const { return num_blocks_; }

 private:
  int32_t num_blocks_;
  std::vector<int32_t> free_;  // a stack: the block released last is reused first, while it is warm in cache
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

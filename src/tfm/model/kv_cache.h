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
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_blocks() const { return num_blocks_; }

 private:
  int32_t num_blocks_;
  std::vector<int32_t> free_;  // a stack: the block released last is reused first, while it is warm in cache
};

// Blocks of `block_size` that hold `tokens` tokens of one sequence.
inline int64_t blocks_for(int64_t tokens, int64_t block_size) {
  return (tokens + block_size - 1) / block_size;
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

  static KVCache create(const ModelConfig& config, int32_t num_blocks, int64_t block_size, DType dtype,
                        Device device);
};

}  // namespace tfm

#include "tfm/model/kv_cache.h"

#include <iomanip>
#include <limits>
#include <sstream>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"

namespace tfm {

BlockPool::BlockPool(int32_t num_blocks) : num_blocks_(0) {
  grow(num_blocks);
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

void BlockPool::grow(int32_t num_blocks) {
  if (num_blocks <= num_blocks_) return;
  free_.reserve(free_.size() + static_cast<size_t>(num_blocks - num_blocks_));
  for (int32_t b = num_blocks - 1; b >= num_blocks_; --b) free_.push_back(b);
  num_blocks_ = num_blocks;
}

namespace {

// What a user can act on when a cache does not fit: its tokens, its bytes and where.
std::string describe(int64_t num_blocks, int64_t block_size, size_t layers, const Shape& block, DType dtype,
                     Device device) {
  const double bytes = static_cast<double>(num_blocks) * static_cast<double>(shape_bytes(block, dtype)) *
                       2.0 * static_cast<double>(layers);
  std::ostringstream out;
  out << "a KV cache of " << num_blocks << " blocks of " << block_size << " tokens (" << std::setprecision(3)
      << bytes / double(1 << 30) << " GiB on " << device.str() << ")";
  return out.str();
}

}  // namespace

KVCache KVCache::create(const ModelConfig& config, int64_t num_blocks, int64_t block_size, DType dtype,
                        Device device) {
  check(num_blocks > 0 && block_size > 0, "a KV cache needs blocks, got ", num_blocks, " of ", block_size);
  KVCache cache;
  cache.block_size = block_size;
  cache.block_ = {1, block_size, config.num_key_value_heads, config.head_dim};
  cache.dtype_ = dtype;
  cache.device_ = device;
  cache.layers.resize(static_cast<size_t>(config.num_hidden_layers));
  cache.reserve(num_blocks);
  return cache;
}

void KVCache::reserve(int64_t num_blocks) {
  const int64_t kept = pool.num_blocks();
  if (num_blocks <= kept) return;
  const std::string what = describe(num_blocks, block_size, layers.size(), block_, dtype_, device_);
  // A forward batch addresses cache slots (block * block_size + offset) as int32.
  check(num_blocks <= std::numeric_limits<int32_t>::max() / block_size, what,
        " holds more tokens than tfm addresses (", std::numeric_limits<int32_t>::max(), ")");
  Shape shape = block_;
  shape[0] = num_blocks;
  try {
    // Layer by layer, so that growing takes memory for the cache and one layer's new tensors.
    for (LayerCache& layer : layers) {
      for (Tensor* t : {&layer.key, &layer.value}) {
        Tensor grown = empty(shape, dtype_, device_);
        if (kept > 0) copy(grown.narrow(0, kept), *t);
        *t = std::move(grown);
      }
    }
  } catch (const Error& e) {
    throw_error(what, ": ", e.what());
  }
  pool.grow(static_cast<int32_t>(num_blocks));
}

}  // namespace tfm

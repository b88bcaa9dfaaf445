#include "tfm/model/kv_cache.h"

#include <algorithm>
#include <iomanip>
#include <limits>
#include <sstream>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"

namespace tfm {

size_t BlockKeyHash::operator()(const BlockKey& key) const {
  // FNV-1a over the parent and the tokens; equality, not the hash, decides a match.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 1099511628211ull;
  };
  mix(static_cast<uint64_t>(static_cast<int64_t>(key.parent)));
  mix(key.parent_generation);
  for (int32_t t : key.tokens) mix(static_cast<uint32_t>(t));
  return static_cast<size_t>(h);
}

BlockPool::BlockPool(int32_t num_blocks) : blocks_(static_cast<size_t>(std::max(num_blocks, 0))) {
  for (int32_t b = 0; b < num_blocks; ++b) blocks_[static_cast<size_t>(b)].in_free = free_.insert(free_.end(), b);
}

std::optional<int32_t> BlockPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t b = free_.front();
  free_.pop_front();
  Block& block = blocks_[static_cast<size_t>(b)];
  if (block.key) {  // its old content is about to be overwritten
    cached_.erase(*block.key);
    block.key.reset();
  }
  ++block.generation;
  block.refs = 1;
  return b;
}

void BlockPool::release(int32_t b) {
  check(b >= 0 && b < num_blocks() && blocks_[static_cast<size_t>(b)].refs > 0, "release of block ", b,
        ", which is not in use");
  Block& block = blocks_[static_cast<size_t>(b)];
  if (--block.refs == 0) block.in_free = free_.insert(free_.end(), b);
}

void BlockPool::set_key(int32_t b, BlockKey key) {
  check(b >= 0 && b < num_blocks() && blocks_[static_cast<size_t>(b)].refs > 0, "set_key of block ", b,
        ", which is not in use");
  Block& block = blocks_[static_cast<size_t>(b)];
  if (block.key || cached_.count(key)) return;  // keyed already, or another block holds the same content
  block.key = key;
  cached_.emplace(std::move(key), b);
}

std::optional<int32_t> BlockPool::acquire_cached(const BlockKey& key) {
  const auto it = cached_.find(key);
  if (it == cached_.end()) return std::nullopt;
  Block& block = blocks_[static_cast<size_t>(it->second)];
  if (block.refs++ == 0) free_.erase(block.in_free);
  return it->second;
}

void BlockPool::grow(int32_t num_blocks) {
  for (int32_t b = this->num_blocks(); b < num_blocks; ++b) {
    blocks_.emplace_back();
    blocks_.back().in_free = free_.insert(free_.end(), b);
  }
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
  // No blocks is a cache that grows (reserve) before its first step.
  check(num_blocks >= 0 && block_size > 0, "a KV cache needs blocks, got ", num_blocks, " of ", block_size);
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

// Device memory kept for reuse, shared by the device backends. A forward step allocates the same buffers every
// step, and the drivers' own allocations (cudaMalloc, which synchronizes the device; clCreateBuffer) would
// otherwise dominate a decode step. Freed blocks are kept by size and handed out again; a device's work runs
// in order on one queue, so memory reused by a later kernel is ordered after its earlier users.
//
// While a device graph is captured, blocks come from a second pool kept for graphs: a replay writes the
// buffers its capture allocated, so they never go back to the general cache (the graphs of a device share the
// pool, as their replays run one after another).
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>


namespace tfm {

class BlockCache {
 public:
  // `allocate(index, size)` returns a new block of device `index`, or nullptr when the device is out of memory
  // (the cache then gives its free blocks back and asks once more); `free` releases a block.
  using AllocateBlock = std::function<void*(int index, size_t size)>;
  using FreeBlock = std::function<void(int index, void* block)>;
  BlockCache(AllocateBlock allocate, FreeBlock free);

  // A block of at least `bytes`; nullptr when the device has none even after the cache's blocks are freed.
  void* allocate(int index, size_t bytes);
  void deallocate(int index, void* block);

  // Bytes in use on device `index`, rounded as torch.cuda.memory_allocated rounds them (cached blocks are not
  // counted).
  size_t allocated(int index);

  // Switches device `index`'s allocations to the graphs' pool (true) or back; false when asked to start while
  // the device already captures.
  bool set_capturing(int index, bool capturing);

  // Frees every cached block of device `index` (not while it captures: a graph may still take them).
  void release_cached(int index);
  // Frees every cached block of every device, the graphs' pool included: for a backend that goes away (the
  // blocks its tensors hold are theirs to give back first).
  void release_all_cached();

 private:
  struct Block {
    size_t size;      // as allocated (rounded)
    size_t counted;   // toward allocated() while in use
    bool for_graphs;  // in the pool of graphs' memory
  };
  void* take_cached(int index, size_t size);

  AllocateBlock allocate_;
  FreeBlock free_block_;
  std::mutex mutex_;
  std::map<int, std::multimap<size_t, void*>> free_;        // per device: cached blocks by size
  std::map<int, std::multimap<size_t, void*>> graph_free_;  // per device: the graph pool's free blocks
  std::set<int> capturing_;                                 // devices being captured
  std::unordered_map<void*, Block> blocks_;                 // every block held, by address
  std::map<int, size_t> allocated_;                         // per device: allocated()
};

// Header-only: the device backends are libraries linked after tfm_backend.
namespace block_cache_detail {

// Sizes round up to 512 bytes, and to 2 MiB past 1 MiB, so that near sizes share blocks.
inline size_t rounded(size_t bytes) {
  const size_t unit = bytes > (size_t{1} << 20) ? (size_t{2} << 20) : 512;
  return std::max<size_t>(1, (bytes + unit - 1) / unit) * unit;
}

// torch.cuda.memory_allocated counts a tensor's bytes rounded up to its allocator's 512-byte unit.
inline size_t counted(size_t bytes) {
  return std::max<size_t>(1, (bytes + 511) / 512) * 512;
}

}  // namespace block_cache_detail

inline BlockCache::BlockCache(AllocateBlock allocate, FreeBlock free)
    : allocate_(std::move(allocate)), free_block_(std::move(free)) {}

inline void* BlockCache::take_cached(int index, size_t size) {
  auto& cached = capturing_.contains(index) ? graph_free_[index] : free_[index];
  auto it = cached.find(size);
  if (it == cached.end()) return nullptr;
  void* block = it->second;
  cached.erase(it);
  return block;
}

inline void* BlockCache::allocate(int index, size_t bytes) {
  const size_t size = block_cache_detail::rounded(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (void* block = take_cached(index, size)) {
      blocks_[block].counted = block_cache_detail::counted(bytes);
      allocated_[index] += block_cache_detail::counted(bytes);
      return block;
    }
  }
  void* block = allocate_(index, size);
  if (!block) {
    release_cached(index);
    block = allocate_(index, size);
  }
  if (!block) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  blocks_[block] = {size, block_cache_detail::counted(bytes), capturing_.contains(index)};
  allocated_[index] += block_cache_detail::counted(bytes);
  return block;
}

inline void BlockCache::deallocate(int index, void* block) {
  std::lock_guard<std::mutex> lock(mutex_);
  Block& b = blocks_.at(block);
  allocated_[index] -= b.counted;
  (b.for_graphs ? graph_free_ : free_)[index].emplace(b.size, block);
}

inline size_t BlockCache::allocated(int index) {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocated_[index];
}

inline bool BlockCache::set_capturing(int index, bool capturing) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!capturing) {
    capturing_.erase(index);
    return true;
  }
  return capturing_.insert(index).second;
}

inline void BlockCache::release_cached(int index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capturing_.contains(index)) return;
  for (const auto& [size, block] : free_[index]) {
    free_block_(index, block);
    blocks_.erase(block);
  }
  free_[index].clear();
}

inline void BlockCache::release_all_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto* pool : {&free_, &graph_free_}) {
    for (auto& [index, blocks] : *pool) {
      for (const auto& [size, block] : blocks) {
        free_block_(index, block);
        blocks_.erase(block);
      }
      blocks.clear();
    }
  }
}

}  // namespace tfm

// A map that keeps only its `capacity` most recently used entries, for things that are costly to make and
// come in more kinds than are worth keeping (oneDNN's GEMMs, one per row count).
#pragma once

#include <cassert>
#include <cstddef>
#include <list>
#include <map>
#include <utility>

namespace tfm::xpu {

template <typename Key, typename Value>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) { assert(capacity > 0); }

  // The value of `key`, made by `make()` when absent, which then drops the least recently used entry past the
  // capacity. The reference is valid until the next call.
  template <typename Make>
  Value& get(const Key& key, Make&& make) {
    if (auto it = index_.find(key); it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);  // now the most recent
      return it->second->second;
    }
    order_.emplace_front(key, make());
    index_.emplace(key, order_.begin());
    if (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return order_.front().second;
  }

  size_t size() const { return order_.size(); }

 private:
  size_t capacity_;
  std::list<std::pair<Key, Value>> order_;  // most recent first
  std::map<Key, typename std::list<std::pair<Key, Value>>::iterator> index_;
};

}  // namespace tfm::xpu

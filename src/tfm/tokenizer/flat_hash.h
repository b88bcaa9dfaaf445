// Open-addressing hash tables for the two lookups that dominate loading and encoding: token string -> id over
// a vocabulary of 150k strings, and (left id, right id) -> merge for BPE. One flat array each, no nodes, so
// building is a few allocations and a probe is one or two cache lines.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace tfm::tokenizer {

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  uint64_t w = 0;
  std::memcpy(&w, s.data() + i, s.size() - i);
  h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 29);
}

inline size_t table_capacity(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  return cap;
}

// Ids by string, where the strings live elsewhere (key_of(id) returns the string of an id).
class StringIdTable {
 public:
  void reset(size_t n) {
    slots_.assign(table_capacity(n), Slot{});
    mask_ = slots_.size() - 1;
  }
  // Inserts from many threads at once (a vocabulary of 150k is filled in parallel, as its slots are cache
  // misses); of equal keys the largest id stays. Returns the id that did not stay (this one, or the smaller
  // one it replaced), -1 when the key was new. key_of(id) must return the string of every id inserted.
  template <typename KeyOf>
  int32_t insert_concurrently(std::string_view key, int32_t id, const KeyOf& key_of) {
    const uint64_t h = hash_bytes(key);
    const Slot mine{static_cast<uint32_t>(h >> 32), id};
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      std::atomic_ref<Slot> slot(slots_[i]);
      // Acquire and release: whoever displaces an id sees all its inserter did before (Vocab reads a flag).
      Slot seen = slot.load(std::memory_order_acquire);
      while (true) {  // a failed exchange reloads `seen`
        if (seen.id >= 0 && (seen.tag != mine.tag || key_of(seen.id) != key)) break;  // another key's
        if (seen.id >= id) return id;
        if (slot.compare_exchange_weak(seen, mine, std::memory_order_acq_rel, std::memory_order_acquire))
          return seen.id;
      }
    }
  }
  template <typename KeyOf>
  int32_t find(std::string_view key, const KeyOf& key_of) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == static_cast<uint32_t>(h >> 32) && key_of(s.id) == key) return s.id;
    }
  }

 private:
  struct alignas(8) Slot {  // aligned for atomic_ref
    uint32_t tag = 0;       // high hash bits, to skip most string compares
    int32_t id = -1;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// Values by pair of non-negative 32-bit ids.
template <typename V>
class PairTable {
 public:
  void reset(size_t n) {
    slots_.assign(table_capacity(n), Slot{});
    mask_ = slots_.size() - 1;
  }
  void insert_or_assign(int32_t a, int32_t b, V value) {
    const uint64_t key = pack(a, b);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == kEmpty || s.key == key) {
        s = {key, value};
        return;
      }
    }
  }
  const V* find(int32_t a, int32_t b) const {
    const uint64_t key = pack(a, b);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static uint64_t hash(uint64_t k) {
    k *= 0x9E3779B97F4A7C15ull;
    return k ^ (k >> 31);
  }
  struct Slot {
    uint64_t key = kEmpty;
    V value{};
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace tfm::tokenizer

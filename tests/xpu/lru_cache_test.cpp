// LruCache against a plain model of it (entries in order of use, the most recent first) on random lookups.
#include "tfm/backend/xpu/lru_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace tfm::xpu {
namespace {

TEST(LruCache, KeepsTheMostRecentlyUsedAndMakesEachMissOnce) {
  std::mt19937 rng(21);
  for (size_t capacity : {1, 3, 8}) {
    LruCache<int, int> cache(capacity);
    std::vector<std::pair<int, int>> model;  // (key, value), most recent first, at most `capacity`
    int made = 0;
    for (int step = 0; step < 2000; ++step) {
      const int key = std::uniform_int_distribution<int>(0, 11)(rng);
      bool called = false;
      const int value = cache.get(key, [&] {
        called = true;
        return ++made;  // a value no other make gives
      });

      const auto at = std::find_if(model.begin(), model.end(), [&](const auto& e) { return e.first == key; });
      const bool kept = at != model.end();
      const int want = kept ? at->second : made;
      if (kept) model.erase(at);
      model.insert(model.begin(), {key, want});
      if (model.size() > capacity) model.pop_back();

      ASSERT_EQ(called, !kept) << "capacity " << capacity << ", step " << step << ", key " << key;
      ASSERT_EQ(value, want) << "capacity " << capacity << ", step " << step << ", key " << key;
      ASSERT_EQ(cache.size(), model.size());
    }
  }
}

}  // namespace
}  // namespace tfm::xpu

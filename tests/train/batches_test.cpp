// The epoch order against tests/fixtures/epoch_order.py, and micro-batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "support/error_of.h"
#include "tfm/train/batches.h"
#include "train_fixtures.h"

namespace tfm {
namespace {

using test_support::error_of;

TEST(EpochOrder, MatchesThePythonDefinition) {
  const json::Value cases = json::parse_file(testing::fixture("epoch_orders.json"));
  for (const json::Value& c : cases.as_array()) {
    const uint64_t seed = std::stoull(c.at("seed").as_string());
    SCOPED_TRACE("n " + std::to_string(c.at("n").as_int()) + " seed " + std::to_string(seed) + " epoch " +
                 std::to_string(c.at("epoch").as_int()));
    EXPECT_EQ(epoch_order(c.at("n").as_int(), seed, c.at("epoch").as_int()),
              testing::ints_of<int64_t>(c.at("order")));
  }
}

TEST(EpochOrder, IsAPermutationThatChangesEachEpoch) {
  const std::vector<int64_t> first = epoch_order(1000, 7, 0);
  std::vector<int64_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(first, identity);
  EXPECT_NE(first, epoch_order(1000, 7, 1));
  EXPECT_NE(first, epoch_order(1000, 8, 0));
  EXPECT_EQ(first, epoch_order(1000, 7, 0));
}

TEST(EpochOrder, NegativeCountIsAnError) {
  EXPECT_EQ(error_of([] { epoch_order(-1, 0, 0); }), "cannot order -1 examples");
}

std::vector<TrainingExample> examples_of_lengths(const std::vector<int>& lengths) {
  std::vector<TrainingExample> examples;
  for (int n : lengths) examples.push_back({std::vector<int32_t>(n, 1), std::vector<int32_t>(n, 1)});
  return examples;
}

TEST(MicroBatches, ConsecutiveGroupsOfTheOrder) {
  const auto examples = examples_of_lengths({1, 2, 3, 4, 5});
  const std::vector<int64_t> order = {4, 0, 3, 1, 2};
  const auto batches = micro_batches(examples, order, 2, false);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].examples, (std::vector<const TrainingExample*>{&examples[4], &examples[0]}));
  EXPECT_EQ(batches[1].examples, (std::vector<const TrainingExample*>{&examples[3], &examples[1]}));
  EXPECT_EQ(batches[2].examples, (std::vector<const TrainingExample*>{&examples[2]}));
  EXPECT_EQ(batches[0].num_tokens, 6);
  EXPECT_EQ(batches[1].num_tokens, 6);
  EXPECT_EQ(batches[2].num_tokens, 3);

  EXPECT_EQ(micro_batches(examples, order, 2, true).size(), 2u);
  EXPECT_EQ(micro_batches(examples, order, 5, true).size(), 1u);
  EXPECT_EQ(micro_batches(examples, order, 8, false).size(), 1u);
  EXPECT_TRUE(micro_batches(examples, order, 8, true).empty());
  EXPECT_TRUE(micro_batches(examples, {}, 2, false).empty());
}

TEST(MicroBatches, BadSizeOrIndexIsAnError) {
  const auto examples = examples_of_lengths({1, 2});
  EXPECT_EQ(error_of([&] {
              micro_batches(examples, {0, 1}, 0, false);
            }),
            "per_device_train_batch_size must be positive, got 0");
  EXPECT_EQ(error_of([&] {
              micro_batches(examples, {0, 2}, 1, false);
            }),
            "example index 2 is outside the 2 examples");
  EXPECT_EQ(error_of([&] { micro_batches(examples, {-1}, 1, false); }),
            "example index -1 is outside the 2 examples");
}

}  // namespace
}  // namespace tfm

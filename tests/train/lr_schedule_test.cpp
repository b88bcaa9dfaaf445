// LRSchedule against the rates Transformers' own scheduler lambdas give (tests/fixtures/lr_schedules.json,
// from make_lr_schedule_references.py).
#include "tfm/train/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/error_of.h"

namespace tfm {
namespace {

json::Value load_references() {
  return json::parse_file(std::string(TFM_SOURCE_DIR) + "/tests/fixtures/lr_schedules.json");
}

// The case's arguments as a config file would give them, through TrainingArguments and Trainer's
// create_scheduler path.
LRSchedule schedule_of(const json::Value& c) {
  json::Object config = {{"lr_scheduler_type", c.at("lr_scheduler_type")},
                         {"learning_rate", c.at("learning_rate")},
                         {"warmup_steps", c.at("warmup_steps")},
                         {"lr_scheduler_kwargs", c.at("lr_scheduler_kwargs")}};
  const TrainingArguments args = TrainingArguments::from_json(json::Value(std::move(config)));
  return LRSchedule::from_args(args, c.at("num_training_steps").as_int());
}

TEST(LRSchedule, MatchesTransformersAtEveryStep) {
  const json::Value refs = load_references();
  size_t values = 0;
  for (const json::Value& c : refs.at("schedules").as_array()) {
    SCOPED_TRACE(json::dump_compact(c.at("lr_scheduler_type")) + " " + json::dump_compact(c.at("lr_scheduler_kwargs")) +
                 " warmup " + json::dump_compact(c.at("warmup_steps")) + " of " +
                 json::dump_compact(c.at("num_training_steps")));
    const LRSchedule schedule = schedule_of(c);
    EXPECT_EQ(schedule.num_warmup_steps(), c.at("num_warmup_steps").as_int());
    const json::Array& lrs = c.at("lrs").as_array();
    for (size_t step = 0; step < lrs.size(); ++step) {
      const double expected = lrs[step].as_double();
      const double got = schedule.lr(static_cast<int64_t>(step));
      EXPECT_LE(std::abs(got - expected), 1e-12 * std::abs(expected)) << "step " << step << ": " << got << " vs "
                                                                      << expected;
      ++values;
    }
  }
  EXPECT_GT(values, 400u);
}

TEST(LRSchedule, RefusesWhatTransformersRefuses) {
  const json::Value refs = load_references();
  for (const json::Value& c : refs.at("errors").as_array()) {
    EXPECT_EQ(test_support::error_of([&] { schedule_of(c); }), c.at("error").as_string());
  }
}

TEST(LRSchedule, FirstStepOfLinearWarmupIsZero) {
  // LambdaLR's step counting: the first optimizer step gets lambda(0), which warmup makes 0.
  const LRSchedule schedule(SchedulerType::linear, 1e-3, 10, 100);
  EXPECT_EQ(schedule.lr(0), 0.0);
  EXPECT_DOUBLE_EQ(schedule.lr(10), 1e-3);
  EXPECT_EQ(schedule.lr(100), 0.0);
}

}  // namespace
}  // namespace tfm

// TrainerState against a trainer_state.json that Transformers 5.17's TrainerState.save_to_json wrote (with a
// TrainerControl as its stateful callback, as the Trainer saves it).
#include "tfm/train/trainer_state.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/error_of.h"
#include "support/scratch_dir.h"
#include "tfm/io/file.h"

namespace tfm {
namespace {

using test_support::error_of;

const char* const kTransformersState = R"({
  "best_global_step": null,
  "best_metric": null,
  "best_model_checkpoint": null,
  "epoch": 1.5,
  "eval_steps": 500,
  "global_step": 30,
  "is_hyper_param_search": false,
  "is_local_process_zero": true,
  "is_world_process_zero": true,
  "log_history": [
    {
      "epoch": 0.5,
      "grad_norm": 1.0625,
      "learning_rate": 5e-05,
      "loss": 2.25,
      "step": 10
    },
    {
      "epoch": 1.0,
      "grad_norm": 0.75,
      "learning_rate": 2.5e-05,
      "loss": 1.875,
      "step": 20
    }
  ],
  "logging_steps": 10,
  "max_steps": 40,
  "num_input_tokens_seen": 0,
  "num_train_epochs": 2,
  "save_steps": 10,
  "stateful_callbacks": {
    "TrainerControl": {
      "args": {
        "should_epoch_stop": false,
        "should_evaluate": false,
        "should_log": false,
        "should_save": false,
        "should_training_stop": false
      },
      "attributes": {}
    }
  },
  "total_flos": 1234.5,
  "train_batch_size": 8,
  "trial_name": null,
  "trial_params": null
}
)";

TEST(TrainerState, ReadsWhatTransformersWrites) {
  const TrainerState state = TrainerState::from_json(json::parse(kTransformersState));
  EXPECT_EQ(state.global_step, 30);
  EXPECT_EQ(state.epoch, 1.5);
  EXPECT_EQ(state.max_steps, 40);
  EXPECT_EQ(state.train_batch_size, 8);
  EXPECT_EQ(state.total_flos, 1234.5);
  ASSERT_EQ(state.log_history.size(), 2u);
  EXPECT_EQ(json::Value(state.log_history[1]).at("loss").as_double(), 1.875);
  EXPECT_FALSE(state.best_metric.has_value());
  EXPECT_FALSE(state.best_model_checkpoint.has_value());
}

TEST(TrainerState, WritesByteForByteAsTransformers) {
  testing::ScratchDir dir;
  TrainerState state;
  state.epoch = 1.5;
  state.global_step = 30;
  state.max_steps = 40;
  state.logging_steps = 10;
  state.save_steps = 10;
  state.train_batch_size = 8;
  state.num_train_epochs = 2;
  state.total_flos = 1234.5;
  state.log_history = {
      {{"loss", 2.25}, {"grad_norm", 1.0625}, {"learning_rate", 5e-05}, {"epoch", 0.5}, {"step", 10}},
      {{"loss", 1.875}, {"grad_norm", 0.75}, {"learning_rate", 2.5e-05}, {"epoch", 1.0}, {"step", 20}}};
  state.stateful_callbacks = {{"TrainerControl", json::Object{{"args", json::Object{{"should_training_stop", false},
                                                                                    {"should_epoch_stop", false},
                                                                                    {"should_save", false},
                                                                                    {"should_evaluate", false},
                                                                                    {"should_log", false}}},
                                                              {"attributes", json::Object{}}}}};
  const std::string path = dir / "trainer_state.json";
  state.save_to_json(path);
  EXPECT_EQ(io::read_file(path), kTransformersState);
  // Only the file itself: the temporary it was written through is gone.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
  // The file's keys are sorted, so what is read back compares as sorted.
  json::DumpOptions sorted;
  sorted.sort_keys = true;
  EXPECT_EQ(json::dump(TrainerState::load_from_json(path).to_json(), sorted), json::dump(state.to_json(), sorted));
}

TEST(TrainerState, MalformedFilesNameTheFileAndField) {
  testing::ScratchDir dir;
  const std::string path = dir / "trainer_state.json";
  std::ofstream(path) << R"({"global_step": "30"})";
  EXPECT_EQ(error_of([&] { TrainerState::load_from_json(path); }),
            path + ": `global_step` must be an integer, found a string");
  std::ofstream(path) << R"({"global_step": 30, "log_history": [{"loss": 1}, 3]})";
  EXPECT_EQ(error_of([&] { TrainerState::load_from_json(path); }),
            path + ": `log_history[1]` must be an object, found an integer");
  std::ofstream(path) << R"({"global_step": 30, "foo": 2})";
  EXPECT_EQ(error_of([&] { TrainerState::load_from_json(path); }),
            path + ": unknown field `foo` (TrainerState.__init__() got an unexpected keyword argument 'foo')");
  std::ofstream(path) << R"({"global_step": 30,)";
  EXPECT_NE(error_of([&] { TrainerState::load_from_json(path); }).find(path), std::string::npos);
}

TEST(TrainerState, ComputeStepsResolvesRatios) {
  TrainingArguments args;
  args.logging_steps = 0.1;
  args.save_steps = 0.25;
  args.eval_steps = 7;
  TrainerState state;
  state.compute_steps(args, 95);
  EXPECT_EQ(state.logging_steps, 10);  // ceil(9.5)
  EXPECT_EQ(state.save_steps, 24);     // ceil(23.75)
  EXPECT_EQ(state.eval_steps, 7);
  args.eval_steps.reset();
  TrainerState fresh;
  fresh.compute_steps(args, 95);
  EXPECT_EQ(fresh.eval_steps, 500);  // unset eval_steps leaves the state's default
}

}  // namespace
}  // namespace tfm

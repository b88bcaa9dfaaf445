// Checkpoint folders: names, numeric order, rotation and the last checkpoint as Transformers' trainer_utils
// (5.17) computes them, and the write-then-rename that keeps half-written checkpoints invisible.
#include "tfm/train/checkpoint_folder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/error_of.h"
#include "support/scratch_dir.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;
using test_support::error_of;

void make_folders(const testing::ScratchDir& dir, const std::vector<std::string>& names) {
  for (const std::string& name : names) fs::create_directories(dir / name);
}

std::vector<std::string> names_of(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) out.push_back(fs::path(p).filename().string());
  return out;
}

TEST(CheckpointFolder, NamedByGlobalStep) {
  EXPECT_EQ(checkpoint_folder_name(500), "checkpoint-500");
}

TEST(CheckpointFolder, SortedByStepNumberNotByName) {
  testing::ScratchDir dir;
  make_folders(dir, {"checkpoint-100", "checkpoint-9", "checkpoint-20", "checkpoint-abc", "runs", "tmp-checkpoint-5"});
  std::ofstream(dir / "checkpoint-1");  // a file, not a folder
  EXPECT_EQ(names_of(sorted_checkpoints(dir.path().string())),
            (std::vector<std::string>{"checkpoint-9", "checkpoint-20", "checkpoint-100"}));
  EXPECT_EQ(sorted_checkpoints((dir.path() / "missing").string()), std::vector<std::string>{});
}

TEST(CheckpointFolder, LastCheckpointTakesExactNamesOnly) {
  testing::ScratchDir dir;
  EXPECT_EQ(last_checkpoint(dir.path().string()), std::nullopt);
  // sort_checkpoints reads checkpoint-300-old as step 300; get_last_checkpoint's ^checkpoint-(\d+)$ skips it.
  make_folders(dir, {"checkpoint-20", "checkpoint-100", "checkpoint-300-old", "tmp-checkpoint-400"});
  EXPECT_EQ(last_checkpoint(dir.path().string()), (dir.path() / "checkpoint-100").string());
  EXPECT_EQ(names_of(sorted_checkpoints(dir.path().string())).back(), "checkpoint-300-old");
}

TEST(CheckpointFolder, RotationKeepsTheNewest) {
  testing::ScratchDir dir;
  make_folders(dir, {"checkpoint-10", "checkpoint-20", "checkpoint-30", "checkpoint-40", "checkpoint-50"});
  const std::string out = dir.path().string();
  EXPECT_TRUE(rotate_checkpoints(out, std::nullopt).empty());
  EXPECT_TRUE(rotate_checkpoints(out, 0).empty());
  EXPECT_TRUE(rotate_checkpoints(out, 5).empty());
  EXPECT_EQ(names_of(rotate_checkpoints(out, 2)),
            (std::vector<std::string>{"checkpoint-10", "checkpoint-20", "checkpoint-30"}));
  EXPECT_EQ(names_of(sorted_checkpoints(out)), (std::vector<std::string>{"checkpoint-40", "checkpoint-50"}));
  EXPECT_EQ(names_of(rotate_checkpoints(out, 1)), std::vector<std::string>{"checkpoint-40"});
  EXPECT_EQ(names_of(sorted_checkpoints(out)), std::vector<std::string>{"checkpoint-50"});
}

TEST(CheckpointFolder, UnfinishedCheckpointsAreInvisible) {
  testing::ScratchDir dir;
  const std::string out = dir.path().string();
  {
    CheckpointWriter writer(out, 10);
    std::ofstream(fs::path(writer.dir()) / "model.safetensors") << "half";
    EXPECT_EQ(last_checkpoint(out), std::nullopt);
    EXPECT_TRUE(sorted_checkpoints(out).empty());
  }  // abandoned, as by an exception
  EXPECT_TRUE(fs::is_empty(dir.path()));

  CheckpointWriter writer(out, 10);
  std::ofstream(fs::path(writer.dir()) / "trainer_state.json") << "{}";
  EXPECT_EQ(writer.commit(), (dir.path() / "checkpoint-10").string());
  EXPECT_TRUE(fs::exists(dir.path() / "checkpoint-10" / "trainer_state.json"));
  EXPECT_EQ(last_checkpoint(out), (dir.path() / "checkpoint-10").string());
}

TEST(CheckpointFolder, CommitReplacesAnOlderCheckpointOfTheSameStep) {
  testing::ScratchDir dir;
  const std::string out = dir.path().string();
  make_folders(dir, {"checkpoint-10"});
  std::ofstream(dir / "checkpoint-10/stale.bin") << "old";
  CheckpointWriter writer(out, 10);
  std::ofstream(fs::path(writer.dir()) / "fresh.bin") << "new";
  writer.commit();
  EXPECT_FALSE(fs::exists(dir.path() / "checkpoint-10" / "stale.bin"));
  EXPECT_TRUE(fs::exists(dir.path() / "checkpoint-10" / "fresh.bin"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), {}), 1);
}

TEST(CheckpointFolder, ResumeFromCheckpointResolvesAsTheTrainer) {
  testing::ScratchDir dir;
  const std::string out = dir.path().string();
  EXPECT_EQ(resolve_resume_checkpoint(std::nullopt, out), std::nullopt);
  EXPECT_EQ(resolve_resume_checkpoint("false", out), std::nullopt);
  EXPECT_EQ(error_of([&] { resolve_resume_checkpoint("true", out); }),
            "No valid checkpoint found in output directory (" + out + ")");
  make_folders(dir, {"checkpoint-5", "checkpoint-12"});
  EXPECT_EQ(resolve_resume_checkpoint("true", out), (dir.path() / "checkpoint-12").string());
  EXPECT_EQ(resolve_resume_checkpoint(dir / "checkpoint-5", out), dir / "checkpoint-5");
  EXPECT_EQ(error_of([&] { resolve_resume_checkpoint(dir / "checkpoint-7", out); }),
            "Can't find a valid checkpoint at " + (dir / "checkpoint-7"));
}

}  // namespace
}  // namespace tfm

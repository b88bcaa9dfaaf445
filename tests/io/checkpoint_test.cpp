#include "tfm/io/checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "safetensors_test_util.h"
#include "support/error_of.h"
#include "tfm/core/error.h"

namespace tfm {
namespace {

using tfm::test_support::error_of;

namespace fs = std::filesystem;
using testing::read_bytes;
using testing::safetensors_fixture;
using testing::ScratchDir;
using testing::write_bytes;

// The fixture state dict, by name (sorted), as the Python script saved it (sharded/ was split in this order).
std::vector<std::pair<std::string, Tensor>> fixture_state_dict() {
  const SafetensorsFile file = SafetensorsFile::open(safetensors_fixture("mixed.safetensors"));
  std::vector<std::pair<std::string, Tensor>> out;
  for (const TensorInfo& info : file.tensors()) out.emplace_back(info.name, file.get(info.name));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

std::vector<std::string> file_names(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".py") names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Checkpoint, OpensAShardedCheckpointThroughItsIndex) {
  const std::string dir = safetensors_fixture("sharded");
  const Checkpoint checkpoint = Checkpoint::open(dir);
  const auto expected = fixture_state_dict();
  std::vector<std::string> names;
  for (const auto& [name, t] : expected) names.push_back(name);
  EXPECT_EQ(checkpoint.names(), names);  // the index's (sorted) order
  EXPECT_EQ(checkpoint.files().size(), 4u);
  for (const auto& [name, t] : expected) {
    SCOPED_TRACE(name);
    const Tensor got = checkpoint.get(name);
    EXPECT_EQ(got.dtype(), t.dtype());
    EXPECT_EQ(got.shape(), t.shape());
    EXPECT_EQ(std::memcmp(got.raw(), t.raw(), t.nbytes()), 0);
    EXPECT_EQ(checkpoint.find(name)->shape, t.shape());
  }
  EXPECT_EQ(checkpoint.file_of("lm_head.weight"), dir + "/model-00001-of-00004.safetensors");
  EXPECT_EQ(checkpoint.find("absent"), nullptr);
  EXPECT_NE(error_of([&] { checkpoint.get("absent"); }).find("'absent'"), std::string::npos);
}

// save_sharded writes the files huggingface_hub's split + safetensors + Transformers' index write, byte for
// byte.
TEST(Checkpoint, SavesShardsAsTransformersDoes) {
  ScratchDir dir;
  const std::string out = testing::export_dir(dir) + "/sharded";
  save_sharded(out, fixture_state_dict(), 64, {{"format", "pt"}});
  const fs::path reference = safetensors_fixture("sharded");
  ASSERT_EQ(file_names(out), file_names(reference));
  for (const std::string& name : file_names(reference)) {
    SCOPED_TRACE(name);
    EXPECT_EQ(read_bytes(out + "/" + name), read_bytes((reference / name).string()));
  }
}

TEST(Checkpoint, SavesOneFileWhenItFitsAndDropsAnEarlierSave) {
  ScratchDir dir;
  save_sharded(dir.path().string(), fixture_state_dict(), 64, {{"format", "pt"}});
  write_bytes(dir / "notes.txt", "kept");
  save_sharded(dir.path().string(), fixture_state_dict(), 1 << 20, {{"format", "pt"}});
  EXPECT_EQ(file_names(dir.path()), (std::vector<std::string>{"model.safetensors", "notes.txt"}));
  EXPECT_EQ(read_bytes(dir / "model.safetensors"), read_bytes(safetensors_fixture("mixed.safetensors")));
  EXPECT_EQ(Checkpoint::open(dir.path().string()).names().size(), fixture_state_dict().size());
}

// As Transformers: a model.safetensors beside an index wins.
TEST(Checkpoint, ModelFileWinsOverAnIndex) {
  ScratchDir dir;
  for (const auto& entry : fs::directory_iterator(safetensors_fixture("sharded"))) {
    fs::copy_file(entry.path(), dir.path() / entry.path().filename());
  }
  const auto tensors = fixture_state_dict();
  save_safetensors(dir / "model.safetensors", {tensors[0]});
  const Checkpoint checkpoint = Checkpoint::open(dir.path().string());
  EXPECT_EQ(checkpoint.names(), std::vector<std::string>{tensors[0].first});
  EXPECT_EQ(checkpoint.file_of(tensors[0].first), dir / "model.safetensors");
}

TEST(Checkpoint, WithoutIndexOrModelFileOpensEverySafetensorsFile) {
  ScratchDir dir;
  const auto tensors = fixture_state_dict();
  save_safetensors(dir / "b.safetensors", {tensors[0], tensors[1]});
  save_safetensors(dir / "a.safetensors", {tensors[2]});
  const Checkpoint checkpoint = Checkpoint::open(dir.path().string());
  EXPECT_EQ(checkpoint.names().size(), 3u);
  EXPECT_EQ(checkpoint.file_of(tensors[2].first), dir / "a.safetensors");
  EXPECT_EQ(checkpoint.file_of(tensors[0].first), dir / "b.safetensors");

  save_safetensors(dir / "c.safetensors", {tensors[1]});
  const std::string message = error_of([&] { Checkpoint::open(dir.path().string()); });
  EXPECT_NE(message.find("'" + tensors[1].first + "' is in both"), std::string::npos) << message;
  EXPECT_NE(message.find(dir / "c.safetensors"), std::string::npos) << message;
}

TEST(Checkpoint, BadIndexesNameTheIndexTheShardAndTheTensor) {
  ScratchDir dir;
  save_sharded(dir.path().string(), fixture_state_dict(), 64);
  const std::string index = dir / "model.safetensors.index.json";
  const std::string good = read_bytes(index);
  const auto with_index = [&](const std::string& text) {
    write_bytes(index, text);
    return error_of([&] { Checkpoint::open(dir.path().string()); });
  };
  std::string m = with_index(R"({"weight_map": {"w": "model-00009-of-00009.safetensors"}})");
  EXPECT_NE(m.find(index), std::string::npos) << m;
  EXPECT_NE(m.find("'w'"), std::string::npos) << m;
  EXPECT_NE(m.find("does not exist"), std::string::npos) << m;

  m = with_index(R"({"weight_map": {"not.there": "model-00001-of-00004.safetensors"}})");
  EXPECT_NE(m.find("'not.there'"), std::string::npos) << m;
  EXPECT_NE(m.find(dir / "model-00001-of-00004.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("has no such tensor"), std::string::npos) << m;

  m = with_index(R"({"weight_map": {"w": "../model-00001-of-00004.safetensors"}})");
  EXPECT_NE(m.find("outside the folder"), std::string::npos) << m;
  m = with_index(R"({"weight_map": {"w": 3}})");
  EXPECT_NE(m.find("'w' maps to 3"), std::string::npos) << m;
  m = with_index(R"({"metadata": {}})");
  EXPECT_NE(m.find("no \"weight_map\""), std::string::npos) << m;
  m = with_index("{");
  EXPECT_NE(m.find(index), std::string::npos) << m;

  // A broken shard: the error names the shard and its tensor.
  write_bytes(index, good);
  std::string shard = read_bytes(dir / "model-00002-of-00004.safetensors");
  shard.resize(shard.size() - 1);
  write_bytes(dir / "model-00002-of-00004.safetensors", shard);
  m = error_of([&] { Checkpoint::open(dir.path().string()); });
  EXPECT_NE(m.find(dir / "model-00002-of-00004.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("tensor '"), std::string::npos) << m;
}

TEST(Checkpoint, EmptyOrMissingFolderIsAnError) {
  ScratchDir dir;
  EXPECT_NE(error_of([&] { Checkpoint::open(dir.path().string()); }).find("no other .safetensors file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Checkpoint::open(dir / "missing"); }).find("does not exist"), std::string::npos);
}

}  // namespace
}  // namespace tfm

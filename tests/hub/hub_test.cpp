// Downloads from a fake Hub served by the test itself on 127.0.0.1 (fake_hub.h); no test needs the internet.
#include "tfm/io/hub.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "fake_hub.h"
#include "tfm/core/error.h"
#include "tfm/io/hub_cache.h"
#include "tfm/io/hub_client.h"
#include "tfm/io/json.h"
#include "tfm/io/sha256.h"

namespace tfm::io {
namespace {

namespace fs = std::filesystem;
using test::FakeHub;
using test::FakeRepo;

constexpr const char* kCommit = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567";
constexpr const char* kOldCommit = "fedcba9876543210fedcba9876543210fedcba98";

std::string pattern(size_t size, int seed) {
  std::string bytes(size, '\0');
  uint32_t x = static_cast<uint32_t>(seed) * 2654435761u + 1;
  for (char& c : bytes) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return bytes;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A sharded model repo as the Hub holds one, with files tfm must leave alone (README, .bin, consolidated).
FakeRepo sharded_repo() {
  FakeRepo repo;
  repo.commit = kCommit;
  repo.refs["v1.0"] = kCommit;
  repo.files = {
      {".gitattributes", "*.safetensors filter=lfs diff=lfs merge=lfs -text\n"},
      {"README.md", "# tiny\n"},
      {"config.json", R"({"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2})"},
      {"generation_config.json", R"({"do_sample": false})"},
      {"tokenizer.json", R"({"version": "1.0", "model": {"type": "BPE"}})"},
      {"tokenizer_config.json", R"({"tokenizer_class": "PreTrainedTokenizerFast"})"},
      {"special_tokens_map.json", R"({"eos_token": "</s>"})"},
      {"chat_template.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}"},
      {"model.safetensors.index.json",
       R"({"metadata": {"total_size": 1}, "weight_map": {"b": "model-00002-of-00002.safetensors",)"
       R"( "a": "model-00001-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}})"},
      {"model-00001-of-00002.safetensors", pattern(300000, 1)},
      {"model-00002-of-00002.safetensors", pattern(70000, 2)},
      {"consolidated.safetensors", pattern(1000, 3)},
      {"pytorch_model.bin", pattern(1000, 4)},
  };
  repo.lfs = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
              "consolidated.safetensors", "pytorch_model.bin"};
  return repo;
}

const std::set<std::string> kShardedModelFiles = {"config.json",
                                                  "generation_config.json",
                                                  "tokenizer.json",
                                                  "tokenizer_config.json",
                                                  "special_tokens_map.json",
                                                  "chat_template.jinja",
                                                  "model.safetensors.index.json",
                                                  "model-00001-of-00002.safetensors",
                                                  "model-00002-of-00002.safetensors"};

class HubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT", "HF_HUB_CACHE"}) {
      ::unsetenv(name);
    }
    static int counter = 0;
    cache_ = fs::temp_directory_path() /
             ("tfm_hub_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(cache_);
    hub_.add_repo("org/sharded", sharded_repo());
    FakeRepo solo;
    solo.commit = kOldCommit;
    solo.files = {{"config.json", "{}"}, {"model.safetensors", pattern(5000, 5)}, {"tokenizer.json", "{}"}};
    solo.lfs = {"model.safetensors"};
    hub_.add_repo("solo", solo);
    FakeRepo gated = solo;
    gated.gated = true;
    hub_.add_repo("org/gated", gated);
  }
  void TearDown() override { fs::remove_all(cache_); }

  HubOptions options(std::string token = "") const {
    HubOptions o;
    o.endpoint = hub_.endpoint();
    o.cache_dir = cache_.string();
    o.token = std::move(token);  // never the token of whoever runs the tests
    o.progress = false;
    return o;
  }
  fs::path repo_folder(const std::string& name) const { return cache_ / name; }
  std::string error_of(const std::string& id, const HubOptions& o) {
    try {
      resolve_model_dir(id, o);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error for " << id;
    return "";
  }
  size_t count_requests(const std::string& method, const std::string& path_part) const {
    size_t n = 0;
    for (const auto& r : hub_.log()) n += r.method == method && r.path.find(path_part) != std::string::npos;
    return n;
  }

  FakeHub hub_;
  fs::path cache_;
};

std::set<std::string> names_in(const fs::path& folder) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) names.insert(entry.path().filename().string());
  return names;
}

TEST(Sha256, MatchesKnownDigests) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 pieces;
  pieces.update("abcdbcdecdefdefgefghfghighij");
  pieces.update("hijkijkljklmklmnlmnomnopnopq");
  EXPECT_EQ(pieces.hex_digest(), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(RepoId, FollowsHuggingfaceHubRules) {
  for (const char* ok : {"gpt2", "org/name", "Qwen/Qwen3-0.6B", "a_b/c.d-e", "x"}) {
    EXPECT_NO_THROW(validate_repo_id(ok)) << ok;
  }
  for (const char* bad : {"", "a/b/c", "-a", "a-", "org/.name", "a--b", "a..b", "name.git", "a b", "/abs",
                          "org/", "caf\xc3\xa9"}) {
    EXPECT_THROW(validate_repo_id(bad), Error) << bad;
  }
  EXPECT_EQ(repo_folder_name("org/name"), "models--org--name");
  EXPECT_EQ(repo_folder_name("gpt2"), "models--gpt2");
}

TEST(ModelFiles, TakesConfigsTokenizerTemplatesAndSafetensorsOnly) {
  const std::vector<std::string> repo = {"README.md",         "model.safetensors",  "pytorch_model.bin",
                                         "config.json",       "chat_template.json", "tokenizer.json",
                                         "added_tokens.json", "vocab.json"};
  EXPECT_EQ(model_files(repo), (std::vector<std::string>{"config.json", "tokenizer.json", "added_tokens.json",
                                                         "chat_template.json", "model.safetensors"}));
  const std::vector<std::string> sharded = {"model.safetensors", "model.safetensors.index.json",
                                            "config.json"};
  EXPECT_EQ(model_files(sharded), (std::vector<std::string>{"config.json", "model.safetensors.index.json"}));
  // What a tokenizer needs: no weights.
  EXPECT_EQ(
      model_files(repo, /*weights=*/false),
      (std::vector<std::string>{"config.json", "tokenizer.json", "added_tokens.json", "chat_template.json"}));
}

// A tokenizer needs no weights: tokenizing with a Hub id does not download gigabytes first.
TEST_F(HubTest, WithoutWeightsDownloadsEverythingButThem) {
  HubOptions o = options();
  o.weights = false;
  const std::string dir = resolve_model_dir("org/sharded", o);
  std::set<std::string> expected = kShardedModelFiles;
  for (const char* weights : {"model.safetensors.index.json", "model-00001-of-00002.safetensors",
                              "model-00002-of-00002.safetensors"}) {
    expected.erase(weights);
  }
  EXPECT_EQ(names_in(dir), expected);
  EXPECT_EQ(count_requests("GET", ".safetensors"), 0u);
  EXPECT_EQ(resolve_model_dir("org/sharded", options()),
            dir);  // the whole model later, into the same snapshot
  EXPECT_EQ(names_in(dir), kShardedModelFiles);
}

TEST_F(HubTest, LocalFolderIsReturnedAsItIs) {
  fs::create_directories(cache_ / "local");
  EXPECT_EQ(resolve_model_dir((cache_ / "local").string(), options()), (cache_ / "local").string());
  EXPECT_TRUE(hub_.log().empty());
  const std::string error = error_of((cache_ / "missing" / "folder").string(), options());
  EXPECT_NE(error.find("neither a local folder nor a Hub repo id"), std::string::npos) << error;
}

TEST_F(HubTest, DownloadsOnlyTheModelFilesIntoTheHuggingfaceHubLayout) {
  const std::string dir = resolve_model_dir("org/sharded", options());
  const fs::path repo = repo_folder("models--org--sharded");
  EXPECT_EQ(dir, (repo / "snapshots" / kCommit).string());
  EXPECT_EQ(names_in(repo), (std::set<std::string>{"blobs", "refs", "snapshots"}));
  EXPECT_EQ(read_file(repo / "refs" / "main"), kCommit);
  EXPECT_EQ(names_in(dir), kShardedModelFiles);

  const FakeRepo fixture = sharded_repo();
  std::set<std::string> blobs;
  for (const std::string& name : kShardedModelFiles) {
    const fs::path pointer = fs::path(dir) / name;
    const std::string& content = fixture.files.at(name);
    const bool lfs = name.ends_with(".safetensors");
    const std::string etag = lfs ? sha256_hex(content) : FakeHub::git_blob_sha1(content);
    ASSERT_TRUE(fs::is_symlink(pointer)) << name;
    EXPECT_EQ(fs::read_symlink(pointer), fs::path("../../blobs") / etag) << name;
    EXPECT_EQ(read_file(pointer), content) << name;
    blobs.insert(etag);
  }
  EXPECT_EQ(names_in(repo / "blobs"), blobs);  // no .incomplete left behind, nothing else fetched
  EXPECT_EQ(count_requests("GET", "consolidated"), 0u);
  EXPECT_EQ(count_requests("HEAD", "README"), 0u);
  EXPECT_EQ(count_requests("HEAD", "pytorch_model"), 0u);
  // The HEAD stops at the redirect to the CDN host; only the GET goes there, without the token.
  EXPECT_EQ(count_requests("HEAD", "/cdn/"), 0u);
  for (const auto& r : hub_.log()) {
    if (r.path.starts_with("/cdn/")) {
      EXPECT_EQ(r.authorization, "");
    }
  }
}

TEST_F(HubTest, ASecondCallOnlyAsksForTheListing) {
  const std::string first = resolve_model_dir("org/sharded", options());
  hub_.clear_log();
  EXPECT_EQ(resolve_model_dir("org/sharded", options()), first);
  const auto log = hub_.log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].path, "/api/models/org/sharded/revision/main");
}

TEST_F(HubTest, TagsCommitHashesAndNamesWithoutOrg) {
  HubOptions o = options();
  o.revision = "v1.0";
  const std::string by_tag = resolve_model_dir("org/sharded", o);
  EXPECT_EQ(read_file(repo_folder("models--org--sharded") / "refs" / "v1.0"), kCommit);
  o.revision = kCommit;
  EXPECT_EQ(resolve_model_dir("org/sharded", o), by_tag);
  EXPECT_FALSE(fs::exists(repo_folder("models--org--sharded") / "refs" / kCommit));

  const std::string solo = resolve_model_dir("solo", options());
  EXPECT_EQ(solo, (repo_folder("models--solo") / "snapshots" / kOldCommit).string());
  EXPECT_EQ(names_in(solo), (std::set<std::string>{"config.json", "model.safetensors", "tokenizer.json"}));
}

TEST_F(HubTest, ConcurrentCallsShareTheDownloads) {
  std::vector<std::string> dirs(3);
  std::vector<std::thread> threads;
  for (std::string& dir : dirs) {
    threads.emplace_back([&] { dir = resolve_model_dir("org/sharded", options()); });
  }
  for (std::thread& t : threads) t.join();
  const std::string expected = (repo_folder("models--org--sharded") / "snapshots" / kCommit).string();
  for (const std::string& dir : dirs) EXPECT_EQ(dir, expected);
  const FakeRepo fixture = sharded_repo();
  for (const std::string& name : kShardedModelFiles)
    EXPECT_EQ(read_file(fs::path(expected) / name), fixture.files.at(name));
  EXPECT_EQ(names_in(repo_folder("models--org--sharded") / "blobs").size(), kShardedModelFiles.size());
}

TEST_F(HubTest, OfflineUsesRefsAndSnapshotsOnly) {
  HubOptions o = options();
  o.offline = true;
  std::string error = error_of("org/sharded", o);
  EXPECT_NE(error.find("'org/sharded' (revision 'main')"), std::string::npos) << error;
  EXPECT_NE(error.find("offline"), std::string::npos) << error;

  const std::string online = resolve_model_dir("org/sharded", options());
  hub_.clear_log();
  EXPECT_EQ(resolve_model_dir("org/sharded", o), online);
  ::setenv("HF_HUB_OFFLINE", "1", 1);
  EXPECT_EQ(resolve_model_dir("org/sharded", options()), online);
  ::unsetenv("HF_HUB_OFFLINE");
  EXPECT_TRUE(hub_.log().empty());

  // A snapshot missing a shard (its blob deleted) is no model.
  fs::remove(repo_folder("models--org--sharded") / "blobs" /
             sha256_hex(sharded_repo().files.at("model-00002-of-00002.safetensors")));
  error = error_of("org/sharded", o);
  EXPECT_NE(error.find("lacks model-00002-of-00002.safetensors"), std::string::npos) << error;
}

TEST_F(HubTest, AnUnreachableHubFallsBackToTheCache) {
  const std::string online = resolve_model_dir("org/sharded", options());
  HubOptions o = options();
  o.revision = "v1.0";
  hub_.stop();
  EXPECT_EQ(resolve_model_dir("org/sharded", options()), online);
  const std::string error = error_of("org/sharded", o);  // no refs/v1.0 cached
  EXPECT_NE(error.find("cannot be reached"), std::string::npos) << error;
}

TEST_F(HubTest, GatedRepoNeedsTheToken) {
  std::string error = error_of("org/gated", options());
  EXPECT_NE(error.find("gated repository 'org/gated'"), std::string::npos) << error;
  EXPECT_NE(error.find("HF_TOKEN"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(repo_folder("models--org--gated") / "snapshots"));

  hub_.clear_log();
  const std::string dir = resolve_model_dir("org/gated", options(FakeHub::kToken));
  EXPECT_EQ(read_file(fs::path(dir) / "config.json"), "{}");
  for (const auto& r : hub_.log()) {
    if (!r.path.starts_with("/cdn/") && r.method == "HEAD") {
      EXPECT_EQ(r.authorization, "Bearer hf_fake_token");
    }
  }
}

TEST_F(HubTest, TokenComesFromTheEnvironmentOrTheTokenFile) {
  HubOptions o = options();
  o.token.reset();
  ::setenv("HF_HOME", (cache_ / "home").c_str(), 1);
  ::unsetenv("HF_TOKEN_PATH");
  ::unsetenv("HUGGING_FACE_HUB_TOKEN");
  ::unsetenv("HF_HUB_DISABLE_IMPLICIT_TOKEN");
  ::setenv("HF_TOKEN", FakeHub::kToken, 1);
  EXPECT_EQ(hub_settings(o).token, FakeHub::kToken);
  EXPECT_NO_THROW(resolve_model_dir("org/gated", o));
  ::unsetenv("HF_TOKEN");
  fs::create_directories(cache_ / "home");
  std::ofstream(cache_ / "home" / "token") << "  hf_from_file\n";
  EXPECT_EQ(hub_settings(o).token, "hf_from_file");
  ::setenv("HF_TOKEN", " \n", 1);  // blank after cleaning: the file still counts, as in huggingface_hub
  EXPECT_EQ(hub_settings(o).token, "hf_from_file");
  ::unsetenv("HF_TOKEN");
  ::unsetenv("HF_HOME");
}

TEST_F(HubTest, MissingRepoAndRevisionAreNamed) {
  std::string error = error_of("org/nothing", options());
  EXPECT_NE(error.find("repository 'org/nothing'"), std::string::npos) << error;
  EXPECT_NE(error.find("HTTP 401"), std::string::npos) << error;
  EXPECT_NE(error.find("HF_TOKEN"), std::string::npos) << error;
  error = error_of("org/nothing", options(FakeHub::kToken));
  EXPECT_NE(error.find("HTTP 404"), std::string::npos) << error;

  HubOptions o = options();
  o.revision = "no-such-branch";
  error = error_of("org/sharded", o);
  EXPECT_NE(error.find("revision 'no-such-branch' not found in repository 'org/sharded'"), std::string::npos)
      << error;
  o.revision = "";
  error = error_of("org/sharded", o);
  EXPECT_NE(error.find("no revision given for 'org/sharded'"), std::string::npos) << error;
}

TEST_F(HubTest, ADroppedConnectionIsResumedWithARange) {
  hub_.drop_connections({100000});
  const std::string dir = resolve_model_dir("org/sharded", options());
  const std::string shard = "model-00001-of-00002.safetensors";
  EXPECT_EQ(read_file(fs::path(dir) / shard), sharded_repo().files.at(shard));
  bool resumed = false;
  for (const auto& r : hub_.log()) resumed |= r.range == "bytes=100000-";
  EXPECT_TRUE(resumed);
}

TEST_F(HubTest, APartialFileOfAnEarlierRunIsResumed) {
  const std::string shard = "model-00001-of-00002.safetensors";
  const std::string content = sharded_repo().files.at(shard);
  const fs::path blobs = repo_folder("models--org--sharded") / "blobs";
  fs::create_directories(blobs);
  std::ofstream(blobs / (sha256_hex(content) + ".incomplete"), std::ios::binary) << content.substr(0, 123456);
  const std::string dir = resolve_model_dir("org/sharded", options());
  EXPECT_EQ(read_file(fs::path(dir) / shard), content);
  size_t ranged = 0;
  for (const auto& r : hub_.log()) ranged += r.range == "bytes=123456-";
  EXPECT_EQ(ranged, 1u);
}

TEST_F(HubTest, AServerIgnoringTheRangeGivesTheWholeFileAgain) {
  const std::string content = pattern(5000, 5);
  const fs::path blobs = repo_folder("models--solo") / "blobs";
  fs::create_directories(blobs);
  std::ofstream(blobs / (sha256_hex(content) + ".incomplete"), std::ios::binary) << content.substr(0, 3000);
  hub_.ignore_ranges(true);
  EXPECT_EQ(read_file(resolve_model_dir("solo", options()) + "/model.safetensors"), content);
  EXPECT_EQ(hub_.log().back().range, "bytes=3000-");
}

TEST_F(HubTest, AnInterruptedDownloadKeepsThePartialFileForTheNextRun) {
  // One attempt that gets 1000 bytes, then four that get nothing: the download gives up.
  hub_.drop_connections({1000, 0, 0, 0, 0});
  HubSettings settings;
  settings.endpoint = hub_.endpoint();
  settings.progress = false;
  HubClient client(settings, std::chrono::milliseconds(0));
  const FileMetadata meta = client.file_metadata("solo", "main", "model.safetensors");
  const fs::path blob = cache_ / "blob";
  fs::create_directories(cache_);
  try {
    client.download(meta, blob, "model.safetensors");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("after 1000 of 5000 bytes"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(blob));
  EXPECT_EQ(fs::file_size(blob.string() + ".incomplete"), 1000u);
  client.download(meta, blob, "model.safetensors");
  EXPECT_EQ(read_file(blob), pattern(5000, 5));
  EXPECT_EQ(hub_.log().back().range, "bytes=1000-");
}

TEST_F(HubTest, ACorruptedLfsBodyIsAnErrorAndNothingIsCached) {
  hub_.corrupt_lfs(true);
  const std::string error = error_of("solo", options());
  EXPECT_NE(error.find("sha256 check failed for 'model.safetensors'"), std::string::npos) << error;
  const fs::path repo = repo_folder("models--solo");
  const std::string etag = sha256_hex(pattern(5000, 5));
  EXPECT_FALSE(fs::exists(repo / "blobs" / etag));
  EXPECT_FALSE(fs::exists(repo / "blobs" / (etag + ".incomplete")));
  EXPECT_FALSE(fs::exists(repo / "snapshots" / kOldCommit / "model.safetensors"));
  hub_.corrupt_lfs(false);
  EXPECT_EQ(read_file(resolve_model_dir("solo", options()) + "/model.safetensors"), pattern(5000, 5));
}

TEST_F(HubTest, AnIndexNamingMissingOrEscapingShardsIsAnError) {
  FakeRepo repo = sharded_repo();
  repo.files["model.safetensors.index.json"] = R"({"weight_map": {"a": "model-00003-of-00002.safetensors"}})";
  hub_.add_repo("org/bad-index", repo);
  std::string error = error_of("org/bad-index", options());
  EXPECT_NE(error.find("names the shard 'model-00003-of-00002.safetensors'"), std::string::npos) << error;

  repo.files["model.safetensors.index.json"] = R"({"weight_map": {"a": "../../../escape.safetensors"}})";
  repo.files["../../../escape.safetensors"] = "x";
  hub_.add_repo("org/escaping-index", repo);
  error = error_of("org/escaping-index", options());
  EXPECT_NE(error.find("invalid file name '../../../escape.safetensors'"), std::string::npos) << error;
}

// For tests/hub/check_cache_with_huggingface_hub.py (skipped unless it sets TFM_HUB_EXPORT): downloads into
// the cache folder $TFM_HUB_EXPORT/tfm-cache for huggingface_hub to read, and writes the files and commit of
// org/sharded to $TFM_HUB_EXPORT/fixture for the script's own fake Hub to serve to huggingface_hub.
TEST_F(HubTest, ExportsACacheForHuggingfaceHub) {
  const char* folder = std::getenv("TFM_HUB_EXPORT");
  if (folder == nullptr) GTEST_SKIP() << "TFM_HUB_EXPORT is not set";
  HubOptions o = options();
  o.cache_dir = (fs::path(folder) / "tfm-cache").string();
  resolve_model_dir("org/sharded", o);
  resolve_model_dir("solo", o);
  o.revision = "v1.0";
  resolve_model_dir("org/sharded", o);
  const FakeRepo repo = sharded_repo();
  for (const auto& [name, content] : repo.files) {
    fs::create_directories(fs::path(folder) / "fixture");
    std::ofstream(fs::path(folder) / "fixture" / name, std::ios::binary) << content;
  }
}

// The other way round (skipped unless the script sets TFM_HUB_PYTHON_CACHE): huggingface_hub's
// snapshot_download wrote org/sharded's model files to that cache; tfm finds them there offline.
TEST_F(HubTest, ReadsACacheWrittenByHuggingfaceHub) {
  const char* folder = std::getenv("TFM_HUB_PYTHON_CACHE");
  if (folder == nullptr) GTEST_SKIP() << "TFM_HUB_PYTHON_CACHE is not set";
  HubOptions o = options();
  o.cache_dir = folder;
  o.offline = true;
  const std::string dir = resolve_model_dir("org/sharded", o);
  EXPECT_EQ(dir, (fs::path(folder) / "models--org--sharded" / "snapshots" / kCommit).string());
  EXPECT_EQ(names_in(dir), kShardedModelFiles);
  for (const std::string& name : kShardedModelFiles)
    EXPECT_EQ(read_file(fs::path(dir) / name), sharded_repo().files.at(name));
  o.revision = "v1.0";
  const std::string error = error_of("org/sharded", o);
  EXPECT_NE(error.find("no refs/v1.0"), std::string::npos) << error;
}

TEST(HubSettings, ReadTheEnvironmentAsHuggingfaceHub) {
  for (const char* name :
       {"HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME", "HF_ENDPOINT", "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS"}) {
    ::unsetenv(name);
  }
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  ::setenv("HOME", "/home/someone", 1);
  HubSettings s = hub_settings({});
  EXPECT_EQ(s.hub_cache, "/home/someone/.cache/huggingface/hub");
  EXPECT_EQ(s.endpoint, "https://huggingface.co");
  EXPECT_FALSE(s.offline);
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(hub_settings({}).hub_cache, "/xdg/huggingface/hub");
  ::setenv("HF_HOME", "~/hf", 1);
  EXPECT_EQ(hub_settings({}).hub_cache, "/home/someone/hf/hub");
  ::setenv("HF_HUB_CACHE", "${HOME}/hub-cache", 1);
  ::setenv("HF_ENDPOINT", "http://mirror.example/", 1);
  ::setenv("HF_HUB_OFFLINE", "yes", 1);
  s = hub_settings({});
  EXPECT_EQ(s.hub_cache, "/home/someone/hub-cache");
  EXPECT_EQ(s.endpoint, "http://mirror.example");
  EXPECT_TRUE(s.offline);
  ::setenv("HF_HUB_OFFLINE", "0", 1);
  EXPECT_FALSE(hub_settings({}).offline);
  EXPECT_EQ(hub_settings({}).etag_timeout_s, 10);
  ::setenv("HF_HUB_ETAG_TIMEOUT", "3", 1);
  ::setenv("HF_HUB_DOWNLOAD_TIMEOUT", "0", 1);
  EXPECT_EQ(hub_settings({}).etag_timeout_s, 3);
  EXPECT_EQ(hub_settings({}).download_timeout_s, 10);
  ::setenv("HF_HUB_ETAG_TIMEOUT", "soon", 1);
  EXPECT_THROW(hub_settings({}), Error);
  ::unsetenv("HF_HUB_ETAG_TIMEOUT");
  ::unsetenv("HF_HUB_DOWNLOAD_TIMEOUT");
  for (const char* name : {"HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME", "HF_ENDPOINT", "HF_HUB_OFFLINE"}) {
    ::unsetenv(name);
  }
  ::setenv("HOME", home.c_str(), 1);
}

}  // namespace
}  // namespace tfm::io

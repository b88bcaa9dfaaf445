// Fuzzes SafetensorsFile::open with mutated valid files (and Checkpoint::open with mutated indexes): every
// outcome must be a consistent file or a tfm::Error, never a crash, another exception, or a view outside the
// file. Runs a fixed seed and a seed from the clock (printed on failure; replay it with
// TFM_FUZZ_SEED=<seed>).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string_view>

#include "safetensors_test_util.h"
#include "tfm/core/error.h"
#include "tfm/io/checkpoint.h"
#include "tfm/io/safetensors.h"

namespace tfm {
namespace {

using testing::ScratchDir;

// Bytes that steer a JSON parser into its interesting branches.
constexpr std::string_view kJsonBytes = "{}[]\",:-+.0123456789eE \\u\"_FUIBOL";

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  // One to four edits of the length field or the header, or a truncation.
  std::string mutate(std::string bytes, size_t header_end) {
    const int edits = 1 + pick(4);
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      const size_t span = std::min(bytes.size(), header_end + 8);  // the header plus a little data
      switch (pick(7)) {
        case 0:  // flip bits anywhere in the length or header
          bytes[pick(span)] ^= static_cast<char>(1 << pick(8));
          break;
        case 1:  // a JSON-significant byte
          if (span > 8) bytes[8 + pick(span - 8)] = kJsonBytes[pick(kJsonBytes.size())];
          break;
        case 2:  // truncate
          bytes.resize(pick(bytes.size() + 1));
          break;
        case 3: {  // a new header length: small, near the true one, or huge
          uint64_t n = pick(3) == 0 ? rng_() : header_end - 8 + pick(17) - 8;
          if (bytes.size() >= 8) std::memcpy(bytes.data(), &n, 8);
          break;
        }
        case 4:  // delete a run inside the header
          if (span > 8) bytes.erase(8 + pick(span - 8), 1 + pick(4));
          break;
        case 5:  // duplicate a run inside the header
          if (span > 8) {
            const size_t at = 8 + pick(span - 8);
            bytes.insert(at, bytes.substr(at, 1 + pick(8)));
          }
          break;
        case 6:  // a digit replaced by a large or odd number
          if (span > 8) {
            const size_t at = 8 + pick(span - 8);
            if (bytes[at] >= '0' && bytes[at] <= '9') {
              static constexpr std::string_view kNumbers[] = {"18446744073709551615",
                                                              "9223372036854775807",
                                                              "-1",
                                                              "1e3",
                                                              "0.5",
                                                              "4294967296",
                                                              "100000000"};
              bytes.replace(at, 1, kNumbers[pick(std::size(kNumbers))]);
            }
          }
          break;
      }
    }
    return bytes;
  }

 private:
  size_t pick(size_t n) { return n ? std::uniform_int_distribution<size_t>(0, n - 1)(rng_) : 0; }
  std::mt19937_64 rng_;
};

// What open() promised about a file it accepted, checked against the file's bytes.
void expect_consistent(const SafetensorsFile& file, const std::string& bytes, const std::string& context) {
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  uint64_t covered = 8 + header;
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& info : file.tensors()) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return std::pair(a->offset, a->nbytes) < std::pair(b->offset, b->nbytes);
  });
  for (const TensorInfo* info : by_offset) {
    ASSERT_EQ(info->offset, covered) << context << " tensor " << info->name;
    ASSERT_EQ(info->nbytes, static_cast<size_t>(shape_numel(info->shape)) * dtype_size(info->dtype))
        << context;
    covered += info->nbytes;
    const Tensor t = file.get(info->name);
    ASSERT_EQ(std::memcmp(t.raw(), bytes.data() + info->offset, info->nbytes), 0) << context;
  }
  ASSERT_EQ(covered, bytes.size()) << context;
}

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

void fuzz(uint64_t seed, int iterations) {
  // Thousands of small writes: in memory where the system offers it.
  const ScratchDir dir = std::filesystem::is_directory("/dev/shm") ? ScratchDir("/dev/shm") : ScratchDir();
  const std::string path = dir / "fuzz.safetensors";
  std::vector<std::string> seeds;
  for (const char* name :
       {"dtypes.safetensors", "mixed.safetensors", "sharded/model-00003-of-00004.safetensors"}) {
    seeds.push_back(testing::read_bytes(testing::safetensors_fixture(name)));
  }
  Mutator mutator(seed);
  int accepted = 0;
  for (int i = 0; i < iterations; ++i) {
    const std::string& original = seeds[i % seeds.size()];
    uint64_t header = 0;
    std::memcpy(&header, original.data(), 8);
    const std::string bytes = mutator.mutate(original, 8 + header);
    testing::write_bytes(path, bytes);
    const std::string context = "seed " + std::to_string(seed) + " iteration " + std::to_string(i);
    try {
      const SafetensorsFile file = SafetensorsFile::open(path);
      ++accepted;
      expect_consistent(file, bytes, context);
      if (::testing::Test::HasFatalFailure()) return;
    } catch (const Error& e) {
      if (std::string_view(e.what()).find(path) == std::string_view::npos) {
        ADD_FAILURE() << context << ": the error does not name the file: " << e.what();
        return;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << context << ": threw something other than tfm::Error: " << e.what();
      return;
    }
  }
  // Some mutations keep a file valid (a space in the padding, a changed data byte); none accepted would mean
  // the fuzzer never reaches the path that builds tensors.
  EXPECT_GT(accepted, 0) << "seed " << seed;
}

// The shards of the sharded fixture with a mutated index: Checkpoint::open gives a tfm::Error or a checkpoint
// whose every name resolves to a tensor of its shard.
void fuzz_index(uint64_t seed, int iterations) {
  const ScratchDir dir = std::filesystem::is_directory("/dev/shm") ? ScratchDir("/dev/shm") : ScratchDir();
  const std::filesystem::path fixture = testing::safetensors_fixture("sharded");
  for (const auto& entry : std::filesystem::directory_iterator(fixture)) {
    std::filesystem::copy_file(entry.path(), dir.path() / entry.path().filename());
  }
  const std::string index_path = dir / "model.safetensors.index.json";
  const std::string original = testing::read_bytes(index_path);
  std::mt19937_64 rng(seed);
  const auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  int accepted = 0;
  for (int i = 0; i < iterations; ++i) {
    std::string text = original;
    for (int e = 1 + static_cast<int>(pick(3)); e > 0 && !text.empty(); --e) {
      switch (pick(3)) {
        case 0:
          text[pick(text.size())] = kJsonBytes[pick(kJsonBytes.size())];
          break;
        case 1:
          text.erase(pick(text.size()), 1 + pick(6));
          break;
        case 2:
          text.resize(pick(text.size() + 1));
          break;
      }
    }
    testing::write_bytes(index_path, text);
    const std::string context = "seed " + std::to_string(seed) + " iteration " + std::to_string(i);
    try {
      const Checkpoint checkpoint = Checkpoint::open(dir.path().string());
      ++accepted;
      for (const std::string& name : checkpoint.names()) {
        const SafetensorsFile file = SafetensorsFile::open(checkpoint.file_of(name));
        ASSERT_NE(file.find(name), nullptr) << context << " " << name;
        ASSERT_EQ(checkpoint.get(name).shape(), file.find(name)->shape) << context;
      }
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << context << ": threw something other than tfm::Error: " << e.what();
      return;
    }
  }
  EXPECT_GT(accepted, 0) << "seed " << seed;
}

// Runs `body(seed)` for a fixed seed and one from the clock, or only for $TFM_FUZZ_SEED when set.
void for_each_seed(const std::function<void(uint64_t)>& body) {
  if (const char* replay = std::getenv("TFM_FUZZ_SEED")) {
    body(std::strtoull(replay, nullptr, 10));
    return;
  }
  body(20261202);
  body(static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
}

TEST(SafetensorsFuzz, MutatedHeadersGiveAnErrorOrAConsistentFile) {
  const int iterations = static_cast<int>(env_or("TFM_FUZZ_ITERATIONS", 6000));
  for_each_seed([&](uint64_t seed) { fuzz(seed, iterations); });
}

TEST(SafetensorsFuzz, MutatedIndexesGiveAnErrorOrAConsistentCheckpoint) {
  const int iterations = static_cast<int>(env_or("TFM_FUZZ_ITERATIONS", 6000) / 4);
  for_each_seed([&](uint64_t seed) { fuzz_index(seed, iterations); });
}

}  // namespace
}  // namespace tfm

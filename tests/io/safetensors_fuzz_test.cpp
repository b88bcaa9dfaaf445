// Fuzzes SafetensorsFile::open with mutated valid files: every outcome must be a consistent file or a
// tfm::Error, never a crash, another exception, or a view outside the file. Runs a fixed seed and a seed from
// the clock (printed on failure; replay it with TFM_FUZZ_SEED=<seed>).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>

#include "safetensors_test_util.h"
#include "tfm/core/error.h"
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
  // Mutations that keep a file valid (a space in the padding, a flipped data byte) must stay accepted.
  EXPECT_GT(accepted, 0) << "seed " << seed;
}

TEST(SafetensorsFuzz, MutatedHeadersGiveAnErrorOrAConsistentFile) {
  const int iterations = static_cast<int>(env_or("TFM_FUZZ_ITERATIONS", 6000));
  if (const char* replay = std::getenv("TFM_FUZZ_SEED")) {
    fuzz(std::strtoull(replay, nullptr, 10), iterations);
    return;
  }
  fuzz(20261202, iterations);
  const uint64_t clock_seed =
      static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  fuzz(clock_seed, iterations);
}

}  // namespace
}  // namespace tfm

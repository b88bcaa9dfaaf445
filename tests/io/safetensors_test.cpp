#include "tfm/io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "safetensors_test_util.h"
#include "tfm/core/error.h"
#include "tfm/core/floats.h"

namespace tfm {
namespace {

using testing::read_bytes;
using testing::safetensors_bytes;
using testing::safetensors_fixture;
using testing::ScratchDir;
using testing::write_bytes;

std::string hex(const void* data, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const auto b = static_cast<const unsigned char*>(data)[i];
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

Shape shape_of(const json::Value& v) {
  Shape s;
  for (const json::Value& d : v.as_array()) s.push_back(d.as_int());
  return s;
}

// Every dtype: what tfm maps from the file equals what the Python library reads back (dtypes.json).
TEST(Safetensors, ReadsEveryDtypeAsPythonDoes) {
  const SafetensorsFile file = SafetensorsFile::open(safetensors_fixture("dtypes.safetensors"));
  const json::Value expected = json::parse_file(safetensors_fixture("dtypes.json"));
  ASSERT_EQ(file.tensors().size(), expected.size());
  for (const json::Value& e : expected.as_array()) {
    const std::string& name = e.at("name").as_string();
    SCOPED_TRACE(name);
    const TensorInfo* info = file.find(name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(safetensors_dtype_name(info->dtype), e.at("dtype").as_string());
    EXPECT_EQ(info->shape, shape_of(e.at("shape")));
    const Tensor t = file.get(name);
    EXPECT_EQ(t.dtype(), info->dtype);
    EXPECT_EQ(t.shape(), info->shape);
    EXPECT_EQ(t.device().type, DeviceType::cpu);
    EXPECT_EQ(hex(t.raw(), t.nbytes()), e.at("data").as_string());
  }
  EXPECT_EQ(file.metadata(), json::Value(json::Object{{"format", "pt"}}));
  EXPECT_EQ(file.find("absent"), nullptr);
}

TEST(Safetensors, TensorsViewTheMappingAndOutliveTheFile) {
  Tensor t;
  const std::string path = safetensors_fixture("mixed.safetensors");
  const std::string bytes = read_bytes(path);
  size_t offset = 0;
  {
    const SafetensorsFile file = SafetensorsFile::open(path);
    t = file.get("lm_head.weight");
    offset = file.find("lm_head.weight")->offset;
    const Tensor again = file.get("lm_head.weight");
    EXPECT_EQ(again.raw(), t.raw());  // zero copy: both view the same mapped bytes
  }
  ASSERT_EQ(t.shape(), (Shape{4, 3}));
  EXPECT_EQ(std::memcmp(t.raw(), bytes.data() + offset, t.nbytes()), 0);
}

// A writer other than Python's may leave elements misaligned; get() then hands out an aligned copy.
TEST(Safetensors, MisalignedTensorsAreCopiedAligned) {
  ScratchDir dir;
  const std::string header =
      "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1,9]}}";
  const float values[2] = {1.5f, -2.0f};
  std::string data(1, '\x05');
  data.append(reinterpret_cast<const char*>(values), sizeof values);
  write_bytes(dir / "m.safetensors", safetensors_bytes(header, data));
  const SafetensorsFile file = SafetensorsFile::open(dir / "m.safetensors");
  ASSERT_NE(file.find("b")->offset % 4, 0u);
  const Tensor b = file.get("b");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.raw()) % 4, 0u);
  EXPECT_EQ(b.data<float>()[0], 1.5f);
  EXPECT_EQ(b.data<float>()[1], -2.0f);
  EXPECT_EQ(file.get("a").data<uint8_t>()[0], 5);
}

TEST(Safetensors, GetOfAnAbsentNameNamesFileAndTensor) {
  const std::string path = safetensors_fixture("mixed.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(path);
  try {
    file.get("nope");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos);
  }
}

std::vector<std::pair<std::string, Tensor>> all_tensors(const SafetensorsFile& file) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const TensorInfo& info : file.tensors()) out.emplace_back(info.name, file.get(info.name));
  return out;
}

// Writing what Python wrote gives Python's bytes exactly (layout, header order, padding, metadata).
TEST(Safetensors, WritesTheBytesPythonWrites) {
  ScratchDir dir;
  const std::string out = testing::export_dir(dir);
  for (const char* name : {"mixed.safetensors", "dtypes.safetensors", "plain.safetensors"}) {
    SCOPED_TRACE(name);
    const SafetensorsFile file = SafetensorsFile::open(safetensors_fixture(name));
    auto tensors = all_tensors(file);
    std::reverse(tensors.begin(), tensors.end());  // the writer orders them itself
    save_safetensors(out + "/" + name, tensors, file.metadata().as_object());
    EXPECT_EQ(read_bytes(out + "/" + name), read_bytes(safetensors_fixture(name)));
  }
}

TEST(Safetensors, RoundTripsWhatItWrites) {
  ScratchDir dir;
  Tensor a = Tensor::cpu({2, 3}, DType::bfloat16);
  for (int i = 0; i < 6; ++i) a.data<uint16_t>()[i] = float_to_bf16(0.5f * i - 1);
  Tensor b = Tensor::cpu({5}, DType::int8);
  for (int i = 0; i < 5; ++i) b.data<int8_t>()[i] = static_cast<int8_t>(-3 * i);
  const Tensor empty = Tensor::cpu({0, 4}, DType::float32);
  const Tensor scalar = Tensor::cpu({}, DType::float64);
  scalar.data<double>()[0] = 3.25;
  const std::string path = testing::export_dir(dir) + "/roundtrip.safetensors";
  save_safetensors(path, {{"a", a}, {"b", b}, {"empty", empty}, {"scalar", scalar}}, {{"note", "hi"}});
  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata(), json::Value(json::Object{{"note", "hi"}}));
  ASSERT_EQ(file.tensors().size(), 4u);
  for (const auto& [name, t] : std::vector<std::pair<std::string, Tensor>>{
           {"a", a}, {"b", b}, {"empty", empty}, {"scalar", scalar}}) {
    SCOPED_TRACE(name);
    const Tensor r = file.get(name);
    EXPECT_EQ(r.dtype(), t.dtype());
    EXPECT_EQ(r.shape(), t.shape());
    EXPECT_EQ(hex(r.raw(), r.nbytes()), hex(t.raw(), t.nbytes()));
  }
  uint64_t header_length = 0;
  std::memcpy(&header_length, read_bytes(path).data(), 8);
  EXPECT_EQ(header_length % 8, 0u);  // padded so the data starts 8-byte aligned
}

// read() copies a tensor's bytes from the file by offset, without its mapping, and refuses ranges outside it.
TEST(Safetensors, ReadsRangesOfATensorFromTheFile) {
  ScratchDir dir;
  Tensor a = Tensor::cpu({1000}, DType::float32);
  for (int i = 0; i < 1000; ++i) a.data<float>()[i] = static_cast<float>(i) * 0.25f;
  const std::string path = testing::export_dir(dir) + "/read.safetensors";
  save_safetensors(path, {{"a", a}, {"b", Tensor::cpu({3}, DType::int8)}});
  const SafetensorsFile file = SafetensorsFile::open(path);
  std::vector<float> part(100);
  file.read("a", 400 * sizeof(float), part.data(), part.size() * sizeof(float));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(part[i], static_cast<float>(400 + i) * 0.25f);
  EXPECT_THROW(file.read("a", 990 * sizeof(float), part.data(), 20 * sizeof(float)), Error);
  EXPECT_THROW(file.read("c", 0, part.data(), 4), Error);
  file.read("a", 4000, part.data(), 0);  // an empty range at the end is fine
}

TEST(Safetensors, WriterRejectsWhatTheFormatCannotHold) {
  ScratchDir dir;
  const Tensor t = Tensor::cpu({2, 2}, DType::float32);
  const auto message = [&](const std::vector<std::pair<std::string, Tensor>>& tensors,
                           const json::Object& meta) {
    try {
      save_safetensors(dir / "bad.safetensors", tensors, meta);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"w", t}, {"w", t}}, {}).find("'w' given twice"), std::string::npos);
  EXPECT_NE(message({{"w", Tensor()}}, {}).find("'w' is undefined"), std::string::npos);
  EXPECT_NE(message({{"w", Tensor::cpu({2}, DType::uint4x2)}}, {}).find("uint4x2"), std::string::npos);
  EXPECT_NE(message({{"w", t}}, {{"k", 1}}).find("metadata 'k'"), std::string::npos);
  EXPECT_NE(message({{"__metadata__", t}}, {}).find("__metadata__"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.safetensors"));
}

// --- Validation: one crafted file per rule; the message names the file and, where one is at fault, the
// tensor.

struct BadFile {
  const char* rule;
  std::string bytes;
  const char* tensor;    // the tensor the message must name, or nullptr
  const char* mentions;  // a phrase the message must hold
};

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":" + dtype + ",\"shape\":" + shape + ",\"data_offsets\":" + offsets +
         "}";
}

std::vector<BadFile> bad_files() {
  using testing::length_prefix;
  const std::string four(4, '\0');
  return {
      {"shorter than 8 bytes", std::string(5, '\0'), nullptr, "too short"},
      {"header length past the end", length_prefix(100) + "{}", nullptr, "runs past the end of the file"},
      {"header length over the cap", length_prefix(100'000'001) + "{}", nullptr, "exceeds the limit"},
      {"header length near 2^64", length_prefix(~uint64_t{0}) + "{}", nullptr, "exceeds the limit"},
      {"header not UTF-8", safetensors_bytes("{\"\xff\":1}"), nullptr, "not valid UTF-8"},
      {"header not JSON", safetensors_bytes("{\"a\":"), nullptr, "not valid JSON"},
      {"header not an object", safetensors_bytes("[]"), nullptr, "not a JSON object"},
      {"entry not an object", safetensors_bytes("{\"w\":1}"), "w", "must be an object"},
      {"missing dtype", safetensors_bytes("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", four), "w",
       "missing \"dtype\""},
      {"missing shape", safetensors_bytes("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", four), "w",
       "missing \"shape\""},
      {"missing data_offsets", safetensors_bytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", four), "w",
       "missing \"data_offsets\""},
      {"unknown dtype", safetensors_bytes("{" + entry("w", "\"f32\"", "[1]", "[0,4]") + "}", four), "w",
       "unknown dtype 'f32'"},
      {"dtype not a string", safetensors_bytes("{" + entry("w", "4", "[1]", "[0,4]") + "}", four), "w",
       "\"dtype\" must be a string"},
      {"sub-byte dtype", safetensors_bytes("{" + entry("w", "\"F4\"", "[2]", "[0,1]") + "}", "\0"), "w",
       "unsupported dtype F4"},
      {"negative shape", safetensors_bytes("{" + entry("w", "\"F32\"", "[-1]", "[0,4]") + "}", four), "w",
       "non-negative integers"},
      {"non-integer shape", safetensors_bytes("{" + entry("w", "\"F32\"", "[1.0]", "[0,4]") + "}", four), "w",
       "non-negative integers"},
      {"shape not an array", safetensors_bytes("{" + entry("w", "\"F32\"", "1", "[0,4]") + "}", four), "w",
       "\"shape\" must be an array"},
      {"shape overflows",
       safetensors_bytes("{" + entry("w", "\"U64\"", "[4611686018427387904,4]", "[0,0]") + "}"), "w",
       "overflows"},
      {"empty shape whose strides overflow",
       safetensors_bytes("{" + entry("w", "\"U8\"", "[0,4294967296,4294967296]", "[0,0]") + "}"), "w",
       "overflows"},
      {"offsets not a pair", safetensors_bytes("{" + entry("w", "\"F32\"", "[1]", "[0,4,8]") + "}", four),
       "w", "[begin, end]"},
      {"offsets negative", safetensors_bytes("{" + entry("w", "\"F32\"", "[0]", "[-4,-4]") + "}"), "w",
       "non-negative integers"},
      {"begin after end", safetensors_bytes("{" + entry("w", "\"U8\"", "[0]", "[4,0]") + "}", four), "w",
       "begin after end"},
      {"span differs from shape", safetensors_bytes("{" + entry("w", "\"F32\"", "[2]", "[0,4]") + "}", four),
       "w", "needs 8"},
      {"offsets past the data", safetensors_bytes("{" + entry("w", "\"F32\"", "[2]", "[0,8]") + "}", four),
       "w", "past the end of the data"},
      {"gap before a tensor", safetensors_bytes("{" + entry("w", "\"U8\"", "[2]", "[2,4]") + "}", four), "w",
       "gap of 2 bytes"},
      {"overlapping tensors",
       safetensors_bytes(
           "{" + entry("a", "\"U8\"", "[4]", "[0,4]") + "," + entry("b", "\"U8\"", "[2]", "[2,4]") + "}",
           four),
       "b", "overlap tensor 'a'"},
      {"bytes after the last tensor",
       safetensors_bytes("{" + entry("w", "\"U8\"", "[2]", "[0,2]") + "}", four), nullptr,
       "belong to no tensor"},
      {"metadata not an object", safetensors_bytes("{\"__metadata__\":[]}"), nullptr, "__metadata__"},
      {"metadata value not a string", safetensors_bytes("{\"__metadata__\":{\"k\":1}}"), nullptr,
       "entry 'k'"},
  };
}

TEST(SafetensorsValidation, EveryRuleGivesAnErrorNamingFileAndTensor) {
  ScratchDir dir;
  for (const BadFile& bad : bad_files()) {
    SCOPED_TRACE(bad.rule);
    const std::string path = dir / "bad.safetensors";
    write_bytes(path, bad.bytes);
    try {
      SafetensorsFile::open(path);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("'" + path + "'"), std::string::npos) << message;
      if (bad.tensor) {
        EXPECT_NE(message.find("tensor '" + std::string(bad.tensor) + "'"), std::string::npos) << message;
      }
      EXPECT_NE(message.find(bad.mentions), std::string::npos) << message;
    }
  }
}

// What the reference library accepts, tfm accepts too.
TEST(SafetensorsValidation, AcceptsWhatTheReferenceAccepts) {
  ScratchDir dir;
  const std::string path = dir / "ok.safetensors";
  const std::vector<std::pair<std::string, std::string>> good = {
      {"empty header", safetensors_bytes("{}")},
      {"null metadata", safetensors_bytes("{\"__metadata__\":null}")},
      {"spaces around the header", safetensors_bytes("  {}    ")},
      {"unknown fields ignored",
       safetensors_bytes("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", "\x07")},
      {"zero-size tensors share an offset",
       safetensors_bytes("{" + entry("a", "\"U8\"", "[0]", "[0,0]") + "," +
                         entry("b", "\"F32\"", "[0,3]", "[0,0]") + "}")},
  };
  for (const auto& [what, bytes] : good) {
    SCOPED_TRACE(what);
    write_bytes(path, bytes);
    EXPECT_NO_THROW(SafetensorsFile::open(path));
  }
  write_bytes(path, good[3].second);
  EXPECT_EQ(SafetensorsFile::open(path).get("w").data<uint8_t>()[0], 7);
}

TEST(SafetensorsValidation, MissingFileNamesIt) {
  try {
    SafetensorsFile::open("/nonexistent/x.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.safetensors"), std::string::npos);
  }
}

}  // namespace
}  // namespace tfm

#include "tfm/io/json.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tfm/core/error.h"

namespace tfm::json {
namespace {

TEST(Json, ParsesEveryKindAndKeepsMemberOrder) {
  const Value v = parse(R"( {"z": 1, "a": [true, false, null], "m": -2.5e3, "s": "x\u00e9\ud83d\ude00\n"} )");
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v.as_object().size(), 4u);
  EXPECT_EQ(v.as_object()[0].first, "z");
  EXPECT_EQ(v.as_object()[1].first, "a");
  EXPECT_EQ(v.at("z").as_int(), 1);
  EXPECT_TRUE(v.at("a")[0].as_bool());
  EXPECT_TRUE(v.at("a")[2].is_null());
  EXPECT_DOUBLE_EQ(v.at("m").as_double(), -2500.0);
  EXPECT_EQ(v.at("s").as_string(), "x\xc3\xa9\xf0\x9f\x98\x80\n");
}

TEST(Json, DuplicateKeysKeepLastValueAtFirstPlace) {
  const Value v = parse(R"({"a": 1, "b": 2, "a": 3})");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v.as_object()[0].first, "a");
  EXPECT_EQ(v.at("a").as_int(), 3);
  std::string big = "{";
  for (int i = 0; i < 100; ++i) big += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
  big += "\"k5\": 99}";
  const Value w = parse(big);
  EXPECT_EQ(w.size(), 100u);
  EXPECT_EQ(w.at("k5").as_int(), 99);
}

TEST(Json, ErrorsNameLineAndColumn) {
  try {
    parse("{\n  \"a\": [1, 2,, 3]\n}");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  for (const char* bad :
       {"", "{", "[1,]", "\"abc", "tru", "01x", "{\"a\" 1}", "[1] 2", "\"\\x\"", "-", "1.", "1e"}) {
    EXPECT_THROW(parse(bad), Error) << bad;
  }
}

TEST(Json, DeepNestingIsAnErrorNotACrash) {
  EXPECT_THROW(parse(std::string(100000, '[')), Error);
}

TEST(Json, DumpsLikePythonJsonDumps) {
  const Value v = parse(R"({"b": [1, 2.0, 1e-05, 1e16, "é\t"], "a": {}, "c": []})");
  EXPECT_EQ(dump(v), R"({"b": [1, 2.0, 1e-05, 1e+16, "é\t"], "a": {}, "c": []})");
  DumpOptions ascii;
  ascii.ensure_ascii = true;
  ascii.sort_keys = true;
  EXPECT_EQ(dump(v, ascii), R"({"a": {}, "b": [1, 2.0, 1e-05, 1e+16, "\u00e9\t"], "c": []})");
  DumpOptions indented;
  indented.indent = 2;
  indented.item_separator = ",";
  EXPECT_EQ(dump(parse(R"({"a": [1, {"x": null}]})"), indented),
            "{\n  \"a\": [\n    1,\n    {\n      \"x\": null\n    }\n  ]\n}");
  EXPECT_EQ(dump_compact(parse(R"({"a": [1, 2]})")), R"({"a":[1,2]})");
}

TEST(Json, PythonFloatRepr) {
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(1e-4), "0.0001");
  EXPECT_EQ(python_float_repr(1e-5), "1e-05");
  EXPECT_EQ(python_float_repr(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(-2.5), "-2.5");
  EXPECT_EQ(python_float_repr(1.5e300), "1.5e+300");
  EXPECT_EQ(python_float_repr(std::nan("")), "nan");
}

TEST(Json, SetReplacesOrAppends) {
  Value v;
  v.set("a", 1);
  v.set("b", "x");
  v.set("a", Array{1, 2});
  EXPECT_EQ(dump(v), R"({"a": [1, 2], "b": "x"})");
}

}  // namespace
}  // namespace tfm::json

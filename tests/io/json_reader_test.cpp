// json::Reader: the pull API, raw() (the fast structural skip that tokenizer.json's vocab and merges go
// through) against json::dump of random documents, and errors for what raw() leaves to the second read.
#include "tfm/io/json_reader.h"

#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <functional>
#include <random>

#include "support/error_of.h"
#include "tfm/core/error.h"

namespace tfm::json {
namespace {

using tfm::test_support::error_of;

TEST(JsonReader, ReadsInTheCallersShape) {
  Reader r(R"( {"a\"b": 7, "list": [1.5, "x\u00e9", true, null, -3], "empty": {}} )");
  r.begin_object();
  std::string_view key;
  ASSERT_TRUE(r.next_member(key));
  EXPECT_EQ(key, "a\"b");
  EXPECT_EQ(r.peek(), Value::Type::integer);
  EXPECT_EQ(r.integer(), 7);
  ASSERT_TRUE(r.next_member(key));
  EXPECT_EQ(key, "list");
  r.begin_array();
  ASSERT_TRUE(r.next_element());
  EXPECT_EQ(r.peek(), Value::Type::number);
  EXPECT_DOUBLE_EQ(r.number(), 1.5);
  ASSERT_TRUE(r.next_element());
  EXPECT_EQ(r.string(), "x\xc3\xa9");
  ASSERT_TRUE(r.next_element());
  EXPECT_TRUE(r.boolean());
  ASSERT_TRUE(r.next_element());
  EXPECT_EQ(r.value(), Value());
  ASSERT_TRUE(r.next_element());
  EXPECT_EQ(r.integer(), -3);
  EXPECT_FALSE(r.next_element());
  ASSERT_TRUE(r.next_member(key));
  EXPECT_EQ(r.value(), Value(Object{}));
  EXPECT_FALSE(r.next_member(key));
  r.end();
}

TEST(JsonReader, TypedReadsOfAnotherTypeFail) {
  EXPECT_NE(error_of([] { Reader(R"("7")").integer(); }).find("expected an integer"), std::string::npos);
  EXPECT_NE(error_of([] { Reader("7.5").integer(); }).find("expected an integer"), std::string::npos);
  EXPECT_NE(error_of([] { Reader("99999999999999999999").integer(); }).find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of([] { Reader("[1]").begin_object(); }).find("expected an object"), std::string::npos);
  EXPECT_NE(error_of([] { Reader("1").string(); }).find("expected a string"), std::string::npos);
  EXPECT_DOUBLE_EQ(Reader("12").number(), 12.0);
}

TEST(JsonReader, StringsWithoutEscapesPointIntoTheText) {
  const std::string text = R"(["plain", "esc\"aped"])";
  Reader r(text);
  r.begin_array();
  ASSERT_TRUE(r.next_element());
  EXPECT_TRUE(r.in_text(r.string()));
  ASSERT_TRUE(r.next_element());
  const std::string_view escaped = r.string();
  EXPECT_EQ(escaped, "esc\"aped");
  EXPECT_FALSE(r.in_text(escaped));
}

// A random value whose strings hold what a structural scan can trip on: quotes, backslash runs, brackets,
// braces, control characters and non-ASCII text, at every offset within a 16-byte block.
Value random_value(std::mt19937& rng, int depth) {
  const char* pieces[] = {"\"", "\\", "\\\\", "\\\"", "{", "}", "[", "]",
                          "a",  "\n", "\t",   "\x01", "é", "😀", " ", ","};
  auto random_string = [&] {
    std::string s;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) s += pieces[rng() % std::size(pieces)];
    return s;
  };
  switch (depth > 3 ? rng() % 4 : rng() % 6) {
    case 0:
      return Value(random_string());
    case 1:
      return Value(static_cast<int64_t>(rng() % 100000) - 50000);
    case 2:
      return Value(static_cast<double>(rng() % 1000) / 8.0);
    case 3:
      return rng() % 2 ? Value(true) : Value();
    case 4: {
      Array items;
      const int n = static_cast<int>(rng() % 5);
      for (int i = 0; i < n; ++i) items.push_back(random_value(rng, depth + 1));
      return Value(std::move(items));
    }
    default: {
      Object members;
      const int n = static_cast<int>(rng() % 5);
      for (int i = 0; i < n; ++i)
        members.emplace_back(random_string() + std::to_string(i), random_value(rng, depth + 1));
      return Value(std::move(members));
    }
  }
}

TEST(JsonReader, RawReturnsExactlyTheValuesText) {
  std::mt19937 rng(42);
  for (int round = 0; round < 300; ++round) {
    const Value inner = random_value(rng, 0);
    DumpOptions options;
    options.indent = static_cast<int>(rng() % 3) - 1;  // one line, or pretty-printed as tokenizer.json
    options.ensure_ascii = rng() % 2;
    const std::string inner_text = dump(inner, options);
    const std::string document = "{\"before\": [1, \"]\"], \"value\": " + inner_text + ", \"after\": \"}\"}";
    SCOPED_TRACE(document);
    Reader r(document);
    r.begin_object();
    std::string_view key;
    ASSERT_TRUE(r.next_member(key));
    r.skip();
    ASSERT_TRUE(r.next_member(key));
    ASSERT_EQ(key, "value");
    const std::string_view raw = r.raw();
    EXPECT_EQ(raw, inner_text);
    EXPECT_EQ(parse(raw), inner);
    ASSERT_TRUE(r.next_member(key));
    EXPECT_EQ(key, "after");
    EXPECT_EQ(r.string(), "}");
    EXPECT_FALSE(r.next_member(key));
    r.end();
  }
}

// Containers of a megabyte and more are scanned in pieces on several threads: the same text must come out,
// wherever the pieces are cut (strings full of brackets, escaped quotes, backslash runs).
TEST(JsonReader, RawOfALargeContainerOnSeveralThreads) {
  std::mt19937 rng(7);
  Array items;
  size_t size = 0;
  while (size < (3u << 20)) {
    items.push_back(random_value(rng, 0));
    size += dump(items.back()).size();
  }
  const Value large(std::move(items));
  DumpOptions pretty;
  pretty.indent = 1;  // newlines, where the pieces are cut
  const std::string large_text = dump(large, pretty);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(std::max(threads, 8));
  for (const std::string& after : {std::string(", \"after\": [\"]\"]}"), std::string("}")}) {
    const std::string document = "{\"value\":\n" + large_text + after;
    Reader r(document);
    r.begin_object();
    std::string_view key;
    ASSERT_TRUE(r.next_member(key));
    EXPECT_TRUE(r.raw() == large_text);
    if (after.size() > 1) {
      ASSERT_TRUE(r.next_member(key));
      r.skip();
    }
    EXPECT_FALSE(r.next_member(key));
    r.end();
  }
  const std::string unclosed = "{\"value\":\n" + large_text.substr(0, large_text.size() - 1);
  EXPECT_THROW(Reader(unclosed).raw(), Error);
  omp_set_num_threads(threads);
}

TEST(JsonReader, WhatRawLeavesIsCheckedWhenReadWithTheDocumentsPosition) {
  const std::string document = "{\n  \"vocab\": {\"a\": 1,\n            \"b\" 2},\n  \"next\": 3\n}";
  Reader r(document);
  r.begin_object();
  std::string_view key;
  ASSERT_TRUE(r.next_member(key));
  const std::string_view vocab = r.raw();  // a missing ':' is not a structural error
  EXPECT_EQ(vocab, "{\"a\": 1,\n            \"b\" 2}");
  const std::string error = error_of([&] { Reader(vocab, document).skip(); });
  EXPECT_NE(error.find("line 3 column 17: expected ':'"), std::string::npos) << error;
}

TEST(JsonReader, RawOfBrokenStructureFails) {
  for (const char* bad : {"[1, 2", "{\"a\": \"}", "[\"\\\"]", "{", "[[[]]"}) {
    EXPECT_THROW(Reader(bad).raw(), Error) << bad;
  }
  EXPECT_THROW(Reader(std::string(1000, '[')).raw(), Error);
  EXPECT_EQ(Reader(" 12 ").raw(), "12");  // scalars are read in full
  EXPECT_THROW(Reader("tru").raw(), Error);
}

}  // namespace
}  // namespace tfm::json

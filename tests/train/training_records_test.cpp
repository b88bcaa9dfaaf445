// The JSON Lines reader of tfm train: the two kinds of record, and an error naming the file and line for
// each way a file can be wrong.
#include <gtest/gtest.h>

#include "support/error_of.h"
#include "tfm/train/training_records.h"
#include "train_fixtures.h"

namespace tfm {
namespace {

using test_support::error_of;

std::string parse_error(const std::string& contents) {
  return error_of([&] { parse_training_records(contents, "data.jsonl"); });
}

const std::string kChat =
    R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]})";

TEST(TrainingRecords, ReadsTextRecordsSkippingBlankLines) {
  const TrainingRecords r =
      parse_training_records("{\"text\": \"a\"}\n\n  \r\n{\"text\": \"b\"}\r\n{\"text\": \"\"}", "x");
  EXPECT_EQ(r.kind, RecordKind::text);
  ASSERT_EQ(r.records.size(), 3u);
  EXPECT_EQ(r.records[0].line, 1);
  EXPECT_EQ(r.records[1].line, 4);
  EXPECT_EQ(r.records[1].value.as_string(), "b");
  EXPECT_EQ(r.records[2].line, 5);  // the last line needs no newline
}

TEST(TrainingRecords, ReadsConversationsWithTheirOtherFields) {
  const std::string tool_call =
      R"({"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "",)"
      R"( "tool_calls": [{"type": "function", "function": {"name": "w", "arguments": {}}}]}]})";
  const TrainingRecords r = parse_training_records(kChat + "\n" + tool_call + "\n", "x");
  EXPECT_EQ(r.kind, RecordKind::messages);
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[1].value[1].at("tool_calls").size(), 1u);
}

TEST(TrainingRecords, ReadsTheFixtures) {
  EXPECT_EQ(read_training_records(testing::fixture("text.jsonl")).records.size(), 8u);
  EXPECT_EQ(read_training_records(testing::fixture("chat.jsonl")).records.size(), 7u);
}

TEST(TrainingRecordsErrors, UnreadableFile) {
  EXPECT_EQ(error_of([] { read_training_records("/nonexistent/data.jsonl"); }),
            "cannot read /nonexistent/data.jsonl");
}

TEST(TrainingRecordsErrors, EmptyFile) {
  EXPECT_EQ(parse_error(""), "data.jsonl holds no records (a training file has one JSON object per line)");
  EXPECT_EQ(parse_error("\n \n\t\n"),
            "data.jsonl holds no records (a training file has one JSON object per line)");
}

TEST(TrainingRecordsErrors, MalformedJsonNamesLineAndColumn) {
  EXPECT_EQ(parse_error("{\"text\": \"a\"}\n\n{\"text\": \"b\",}\n"),
            "data.jsonl: JSON parse error at line 3 column 14: expected a string key");
  EXPECT_EQ(parse_error("{\"text\": \"a\"} {\"text\": \"b\"}\n"),
            "data.jsonl: JSON parse error at line 1 column 15: unexpected data after the JSON value");
  EXPECT_EQ(parse_error("{\"text\": \"a\n\"}\n"),
            "data.jsonl: JSON parse error at line 1 column 12: unterminated string");
}

TEST(TrainingRecordsErrors, RecordShape) {
  EXPECT_EQ(parse_error("[1]"), "data.jsonl line 1: a record must be a JSON object, found an array");
  EXPECT_EQ(parse_error("{\"text\": \"a\"}\n{\"prompt\": \"a\"}"),
            "data.jsonl line 2: the record has neither \"text\" nor \"messages\"");
  EXPECT_EQ(parse_error("{\"text\": \"a\", \"messages\": []}"),
            "data.jsonl line 1: the record has both \"text\" and \"messages\"; give one");
  EXPECT_EQ(parse_error("{\"text\": 3}"), "data.jsonl line 1: \"text\" must be a string, found an integer");
}

TEST(TrainingRecordsErrors, MixedKinds) {
  EXPECT_EQ(
      parse_error("\n{\"text\": \"a\"}\n" + kChat),
      "data.jsonl line 3: a \"messages\" record in a file of \"text\" records (line 2); all records of a "
      "file must be of one kind");
  EXPECT_EQ(
      parse_error(kChat + "\n{\"text\": \"a\"}"),
      "data.jsonl line 2: a \"text\" record in a file of \"messages\" records (line 1); all records of a "
      "file must be of one kind");
}

TEST(TrainingRecordsErrors, MessageShape) {
  EXPECT_EQ(parse_error("{\"messages\": \"hi\"}"),
            "data.jsonl line 1: \"messages\" must be a list of message objects, found a string");
  EXPECT_EQ(parse_error("{\"messages\": []}"), "data.jsonl line 1: \"messages\" is empty");
  EXPECT_EQ(parse_error("{\"messages\": [3]}"),
            "data.jsonl line 1: message 0 must be an object, found an integer");
  EXPECT_EQ(parse_error("{\"messages\": [{\"content\": \"hi\"}]}"),
            "data.jsonl line 1: message 0 needs a \"role\" string");
  EXPECT_EQ(
      parse_error("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\"}]}"),
      "data.jsonl line 1: message 1 needs a \"content\" string (\"\" for a message that only calls tools)");
  EXPECT_EQ(
      parse_error("{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\"}]}]}"),
      "data.jsonl line 1: message 0 needs a \"content\" string (\"\" for a message that only calls tools)");
}

TEST(TrainingRecordsErrors, ConversationWithoutAssistant) {
  EXPECT_EQ(parse_error(kChat + "\n{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}"),
            "data.jsonl line 2: the conversation has no assistant message, so nothing in it takes a loss");
}

TEST(TrainingRecordsErrors, DeepNestingIsAnErrorNotACrash) {
  EXPECT_NE(parse_error("{\"text\": " + std::string(100000, '[')).find("nesting too deep"),
            std::string::npos);
}

}  // namespace
}  // namespace tfm

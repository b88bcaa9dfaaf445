// The examples of tfm train's datasets against Transformers (tests/fixtures/make_dataset_references.py):
// run_clm's blocks of text.jsonl, and Qwen3's apply_chat_template of chat.jsonl with the assistant labels.
#include <gtest/gtest.h>

#include "support/error_of.h"
#include "tfm/train/assistant_labels.h"
#include "tfm/train/dataset.h"
#include "train_fixtures.h"

namespace tfm {
namespace {

using test_support::error_of;
using testing::fixture;
using testing::ints_of;
using testing::scratch_file;
using testing::shipped;

const json::Value& references() {
  static const json::Value refs = json::parse_file(fixture("dataset_references.json"));
  return refs;
}

ChatTemplates qwen3_templates() {
  return load_chat_templates(test_support::shipped_tokenizer("qwen3"), shipped("qwen3").config());
}

class TextBlocks : public ::testing::TestWithParam<std::string> {};

TEST_P(TextBlocks, MatchRunClm) {
  const json::Value& refs = references().at("text").at(GetParam());
  for (const int64_t block_size : {16, 7}) {
    SCOPED_TRACE("block size " + std::to_string(block_size));
    const TrainingDataset dataset =
        load_training_dataset(fixture("text.jsonl"), shipped(GetParam()), {}, block_size);
    EXPECT_EQ(dataset.kind, RecordKind::text);
    EXPECT_EQ(dataset.skipped_records, 0);
    const json::Value& blocks = refs.at(std::to_string(block_size));
    ASSERT_EQ(dataset.examples.size(), blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i) {
      EXPECT_EQ(dataset.examples[i].input_ids, ints_of<int32_t>(blocks[i])) << "block " << i;
      EXPECT_EQ(dataset.examples[i].labels, dataset.examples[i].input_ids) << "block " << i;
    }
  }
}

TEST_P(TextBlocks, FewerTokensThanOneBlockIsAnError) {
  const int64_t total = references().at("text").at(GetParam()).at("total_tokens").as_int();
  EXPECT_EQ(load_training_dataset(fixture("text.jsonl"), shipped(GetParam()), {}, total).examples.size(), 1u);
  EXPECT_EQ(
      error_of([&] { load_training_dataset(fixture("text.jsonl"), shipped(GetParam()), {}, total + 1); }),
      fixture("text.jsonl") + " has " + std::to_string(total) +
          " tokens, fewer than one block of max_seq_length = " + std::to_string(total + 1) + " tokens");
}

INSTANTIATE_TEST_SUITE_P(Shipped, TextBlocks, ::testing::Values("qwen3", "llama2"));

json::Value conversations() {
  json::Array out;
  std::ifstream in(fixture("chat.jsonl"));
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line).at("messages"));
  return out;
}

// What the labels are built from: tfm's renderings and tokens of each conversation and of the prefixes
// around each assistant message are Transformers' own.
TEST(ConversationLabels, PrefixRenderingsMatchTransformers) {
  const tokenizer::Tokenizer& tok = shipped("qwen3");
  const ChatTemplates templates = qwen3_templates();
  const json::Value chats = conversations();
  const json::Value& refs = references().at("chat").at("qwen3");
  ASSERT_EQ(chats.size(), refs.size());
  const auto render = [&](const json::Value& messages, size_t count, bool add_generation_prompt) {
    ChatTemplateInputs inputs;
    inputs.messages = json::Array(messages.as_array().begin(), messages.as_array().begin() + count);
    inputs.add_generation_prompt = add_generation_prompt;
    return apply_chat_template(templates, tok.config(), inputs);
  };
  for (size_t c = 0; c < chats.size(); ++c) {
    SCOPED_TRACE("conversation " + std::to_string(c));
    const json::Value& ref = refs[c];
    const std::string text = render(chats[c], chats[c].size(), false);
    EXPECT_EQ(text, ref.at("text").as_string());
    EXPECT_EQ(tok.encode(text, false), ints_of<int64_t>(ref.at("input_ids")));
    for (const json::Value& turn : ref.at("turns").as_array()) {
      const size_t i = static_cast<size_t>(turn.at("message").as_int());
      SCOPED_TRACE("assistant message " + std::to_string(i));
      const std::string before = render(chats[c], i, true);
      const std::string after = render(chats[c], i + 1, false);
      EXPECT_EQ(before, turn.at("before_text").as_string());
      EXPECT_EQ(after, turn.at("after_text").as_string());
      EXPECT_EQ(tok.encode(before, false), ints_of<int64_t>(turn.at("before_ids")));
      EXPECT_EQ(tok.encode(after, false), ints_of<int64_t>(turn.at("after_ids")));
    }
  }
}

// Qwen3 renders earlier assistant turns differently from the last (no <think> block, reasoning dropped), so
// most turns take the tail rule; the reference applies the same rule in Python.
TEST(ConversationLabels, Qwen3MatchesTheReference) {
  const std::string source = select_chat_template(qwen3_templates(), {});
  const json::Value chats = conversations();
  const json::Value& refs = references().at("chat").at("qwen3");
  for (size_t c = 0; c < chats.size(); ++c) {
    SCOPED_TRACE("conversation " + std::to_string(c));
    const TrainingExample example = tokenize_with_assistant_labels(chats[c], source, shipped("qwen3"));
    EXPECT_EQ(example.input_ids, ints_of<int32_t>(refs[c].at("input_ids")));
    EXPECT_EQ(example.labels, ints_of<int32_t>(refs[c].at("labels")));
  }
}

// Where a template marks the assistant messages with {% generation %}, Transformers' own assistant_masks
// are the spans the prefix rule finds.
TEST(ConversationLabels, MatchTransformersAssistantMasks) {
  const json::Value& refs = references().at("chat").at("generation_template");
  ChatTemplates templates;
  templates.single = refs.at("template").as_string();
  const TrainingDataset dataset =
      load_training_dataset(fixture("chat.jsonl"), shipped("qwen3"), templates, 1000);
  const json::Value& expected = refs.at("conversations");
  ASSERT_EQ(dataset.examples.size(), expected.size());
  for (size_t c = 0; c < expected.size(); ++c) {
    EXPECT_EQ(dataset.examples[c].input_ids, ints_of<int32_t>(expected[c].at("input_ids"))) << c;
    EXPECT_EQ(dataset.examples[c].labels, ints_of<int32_t>(expected[c].at("labels"))) << c;
  }
}

// Cut at max_seq_length; a conversation cut before its first assistant token is skipped and counted.
TEST(ConversationDataset, TruncatesAndSkipsAsTheReference) {
  const json::Value& refs = references().at("chat");
  const int64_t max_seq_length = refs.at("max_seq_length").as_int();
  const TrainingDataset dataset =
      load_training_dataset(fixture("chat.jsonl"), shipped("qwen3"), qwen3_templates(), max_seq_length);
  EXPECT_EQ(dataset.kind, RecordKind::messages);
  size_t e = 0;
  int64_t skipped = 0;
  for (const json::Value& ref : refs.at("qwen3").as_array()) {
    const json::Value& truncated = ref.at("truncated");
    if (truncated.at("skipped").as_bool()) {
      ++skipped;
      continue;
    }
    ASSERT_LT(e, dataset.examples.size());
    EXPECT_EQ(dataset.examples[e].input_ids, ints_of<int32_t>(truncated.at("input_ids"))) << e;
    EXPECT_EQ(dataset.examples[e].labels, ints_of<int32_t>(truncated.at("labels"))) << e;
    ++e;
  }
  EXPECT_EQ(e, dataset.examples.size());
  EXPECT_EQ(skipped, 1);
  EXPECT_EQ(dataset.skipped_records, skipped);
}

TEST(ConversationDataset, EveryConversationCutAwayIsAnError) {
  EXPECT_EQ(
      error_of([] { load_training_dataset(fixture("chat.jsonl"), shipped("qwen3"), qwen3_templates(), 3); }),
      fixture("chat.jsonl") +
          ": every conversation was cut at max_seq_length = 3 before its first assistant token, so none "
          "takes a loss");
}

TEST(ConversationDataset, ModelWithoutChatTemplateIsAnError) {
  EXPECT_EQ(
      error_of([] { load_training_dataset(fixture("chat.jsonl"), shipped("llama2"), {}, 64); }),
      fixture("chat.jsonl") + " holds conversations (\"messages\"), but the model has no chat template");
}

TEST(ConversationDataset, ErrorsNameTheRecordsLine) {
  const std::string path =
      scratch_file("starts_with_assistant.jsonl",
                   "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                   "\"content\": \"Hello\"}]}\n"
                   "{\"messages\": [{\"role\": \"assistant\", \"content\": \"Hello\"}]}\n");
  EXPECT_EQ(error_of([&] { load_training_dataset(path, shipped("qwen3"), qwen3_templates(), 64); }),
            path +
                " line 2: the conversation starts with an assistant message: there is no prompt to render "
                "before it");
  // A template that fails on a record: its error, after the record's line.
  ChatTemplates failing;
  failing.single = "{{ raise_exception('no ' + messages[0].role) }}";
  EXPECT_EQ(error_of([&] { load_training_dataset(path, shipped("qwen3"), failing, 64); }),
            path + " line 1: chat template: template line 1: no user");
}

TEST(ConversationDataset, TemplateThatRewritesThePromptIsAnError) {
  // The prompt's rendering says how many messages follow, so the whole conversation begins differently.
  ChatTemplates counting;
  counting.single =
      "{{ messages | length }}{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}";
  const std::string path = scratch_file("rewrites_prompt.jsonl",
                                        "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
                                        "{\"role\": \"assistant\", \"content\": \"Hello\"}]}\n");
  EXPECT_EQ(error_of([&] { load_training_dataset(path, shipped("qwen3"), counting, 64); }),
            path +
                " line 1: the chat template renders the conversation before message 1 differently from the "
                "whole conversation's beginning, so the assistant's tokens cannot be found");
  ChatTemplates silent;
  silent.single =
      "{% for m in messages if m.role != 'assistant' %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}";
  EXPECT_EQ(error_of([&] { load_training_dataset(path, shipped("qwen3"), silent, 64); }),
            path + " line 1: assistant message 1 renders no tokens that the whole conversation has");
}

TEST(Dataset, MaxSeqLengthMustBePositive) {
  EXPECT_EQ(error_of([] { load_training_dataset(fixture("text.jsonl"), shipped("qwen3"), {}, 0); }),
            "max_seq_length must be positive, got 0");
}

}  // namespace
}  // namespace tfm

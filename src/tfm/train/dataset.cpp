#include "tfm/train/dataset.h"

#include <algorithm>

#include "tfm/core/error.h"
#include "tfm/tokenizer/tokenizer.h"
#include "tfm/train/assistant_labels.h"

namespace tfm {
namespace {

std::vector<TrainingExample> text_blocks(const TrainingRecords& records, const std::string& file,
                                         const tokenizer::Tokenizer& tokenizer, int64_t block_size) {
  std::vector<std::string> texts;
  texts.reserve(records.records.size());
  for (const TrainingRecord& r : records.records) texts.push_back(r.value.as_string());
  const std::vector<std::vector<int64_t>> token_lists = tokenizer.encode_batch(texts);
  int64_t total = 0;
  for (const auto& tokens : token_lists) total += static_cast<int64_t>(tokens.size());
  check(total >= block_size, file, " has ", total,
        " tokens, fewer than one block of max_seq_length = ", block_size, " tokens");

  std::vector<TrainingExample> blocks;
  blocks.reserve(total / block_size);
  TrainingExample block;
  for (const auto& tokens : token_lists) {
    for (const int64_t id : tokens) {
      block.input_ids.push_back(static_cast<int32_t>(id));  // the tokenizer's ids are 32-bit
      if (static_cast<int64_t>(block.input_ids.size()) < block_size) continue;
      block.labels = block.input_ids;
      blocks.push_back(std::move(block));
      block = {};
    }
  }
  return blocks;  // the remainder in `block` is dropped, as group_texts drops it
}

TrainingDataset conversation_examples(const TrainingRecords& records, const std::string& file,
                                      const tokenizer::Tokenizer& tokenizer, const ChatTemplates& templates,
                                      int64_t max_seq_length) {
  check(!templates.empty(), file, " holds conversations (\"messages\"), but the model has no chat template");
  const std::string source = select_chat_template(templates, ChatTemplateInputs{});
  TrainingDataset dataset{RecordKind::messages, {}, 0};
  for (const TrainingRecord& r : records.records) {
    TrainingExample example;
    try {
      example = tokenize_with_assistant_labels(r.value, source, tokenizer);
    } catch (const Error& e) {
      throw_error(file, " line ", r.line, ": ", e.what());
    }
    if (static_cast<int64_t>(example.input_ids.size()) > max_seq_length) {
      example.input_ids.resize(max_seq_length);
      example.labels.resize(max_seq_length);
    }
    const bool takes_loss = std::any_of(example.labels.begin(), example.labels.end(),
                                        [](int32_t label) { return label != kIgnoreIndex; });
    if (takes_loss)
      dataset.examples.push_back(std::move(example));
    else
      ++dataset.skipped_records;
  }
  check(!dataset.examples.empty(), file, ": every conversation was cut at max_seq_length = ", max_seq_length,
        " before its first assistant token, so none takes a loss");
  return dataset;
}

}  // namespace

TrainingDataset load_training_dataset(const std::string& path, const tokenizer::Tokenizer& tokenizer,
                                      const ChatTemplates& templates, int64_t max_seq_length) {
  check(max_seq_length > 0, "max_seq_length must be positive, got ", max_seq_length);
  const TrainingRecords records = read_training_records(path);
  if (records.kind == RecordKind::messages)
    return conversation_examples(records, path, tokenizer, templates, max_seq_length);
  return {RecordKind::text, text_blocks(records, path, tokenizer, max_seq_length), 0};
}

}  // namespace tfm

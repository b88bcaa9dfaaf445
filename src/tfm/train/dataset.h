// The training examples of `tfm train --data FILE.jsonl` (training_records.h reads the file), made as
// Transformers' examples make them:
//  - "text" records as run_clm.py does: each text tokenized with the special tokens the tokenizer adds,
//    all concatenated in file order and cut into blocks of exactly max_seq_length tokens, the remainder
//    dropped (group_texts; run_clm groups each map batch of 1,000 texts, tfm the whole file at once);
//    labels = input_ids.
//  - "messages" records one example each: the conversation rendered by the chat template and tokenized as
//    apply_chat_template(messages, tokenize=True) does, with the loss on the assistant messages only
//    (assistant_labels.h), truncated to max_seq_length. A record whose assistant tokens were all cut away
//    takes no loss and is skipped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tfm/model/causal_lm.h"
#include "tfm/tokenizer/chat_template.h"
#include "tfm/train/training_records.h"

namespace tfm::tokenizer {
class Tokenizer;
}

namespace tfm {

struct TrainingDataset {
  RecordKind kind = RecordKind::text;
  std::vector<TrainingExample> examples;
  int64_t skipped_records = 0;  // conversations truncated before their first assistant token
};

// The examples of a training file. `templates` are the model's chat templates (load_chat_templates), used
// for "messages" files only. Errors name the file and, for a record's, its line.
TrainingDataset load_training_dataset(const std::string& path, const tokenizer::Tokenizer& tokenizer,
                                      const ChatTemplates& templates, int64_t max_seq_length);

}  // namespace tfm

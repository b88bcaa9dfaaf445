// The records of a training file in JSON Lines: one JSON object per line (blank lines skipped), each with a
// "text" string (plain text for causal language modelling) or a "messages" list of {"role", "content"}
// objects (a conversation, as chat templates take it). All records of a file are of one kind. Only the shape
// is read here; tokenizing is dataset.h's part, so a fuzz target (tests/fuzz) reaches this reader alone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/io/json.h"

namespace tfm {

enum class RecordKind { text, messages };

struct TrainingRecord {
  int64_t line = 0;   // 1-based, for errors that come later (a template that fails on this conversation)
  json::Value value;  // the "text" string or the "messages" list
};

struct TrainingRecords {
  RecordKind kind = RecordKind::text;
  std::vector<TrainingRecord> records;  // in file order, at least one
};

// Parses a file's contents; errors are tfm::Error "FILE line N: what was wrong", with `file` the name to
// give. A message needs a "role" and a "content" string; other fields (tool_calls, reasoning_content) pass
// on to the template untouched. A conversation needs an assistant message, as only those take a loss.
TrainingRecords parse_training_records(std::string_view contents, const std::string& file);
// Reads and parses a file; an unreadable one is an error naming it.
TrainingRecords read_training_records(const std::string& path);

}  // namespace tfm

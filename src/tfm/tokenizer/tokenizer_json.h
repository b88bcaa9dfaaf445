// tokenizer.json read for loading. The model's vocab and merges are nearly all of the file (10 of Qwen3's
// 11 MB): they stay JSON text, which the model reads straight into its own tables, and only the rest becomes
// a json::Value tree. Building a tree of 300k small values and tearing it down was half of the load time.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tfm/io/json.h"

namespace tfm::tokenizer {

struct TokenizerJson {
  // Checks the syntax of the whole document; errors name line and column.
  static TokenizerJson parse(std::string text);
  static TokenizerJson read_file(const std::string& path);  // errors also name the file

  json::Value tree;  // the document without model.vocab and model.merges
  // The JSON text of model.vocab and model.merges, "" when absent or null. Each points into `text` or at a
  // literal, so a TokenizerJson can move.
  std::string_view vocab, merges;
  std::unique_ptr<const std::string> text;
  // Unigram scores read exactly, as Python's json reads them for a Transformers class that rebuilds the
  // model from the vocabulary, rather than as the Rust library reads the file (an ulp off at times).
  bool exact_scores = false;
};

}  // namespace tfm::tokenizer

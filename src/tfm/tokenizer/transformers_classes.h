// Transformers' tokenizer classes that rebuild their pipeline in __init__ instead of taking tokenizer.json's
// (LlamaTokenizer ignores the file's normalizer and uses Metaspace, for one). Each entry rewrites the parsed
// tokenizer.json the way its class would, and names the class's default special tokens.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/io/json.h"
#include "tfm/tokenizer/tokenizer.h"
#include "tfm/tokenizer/tokenizer_json.h"

namespace tfm::tokenizer {

struct TokenizerClass {
  std::string_view name;  // the class's own name (tokenizer_class_choice.h resolves aliases and "Fast")
  SpecialTokens defaults;
  // Replaces the pipeline of tokenizer_json (model options, normalizer, pre-tokenizer, decoder) using the
  // options in config (add_prefix_space, legacy); the vocabulary, merges and post-processor stay.
  void (*rebuild)(TokenizerJson& tokenizer_json, const json::Value& config);
  bool readds_special_tokens = false;  // adds every special token again with default settings
  // For a class that sets its own post-processor (in __init__ after Transformers' base class took the file's,
  // or where the file has none, or through update_post_processor): the post-processor it ends with, given the
  // tokenizer as loaded (special tokens added, for their ids), the config and the file's post-processor (null
  // when the file has none). nullopt keeps the file's.
  std::optional<json::Value> (*post_processor)(const Tokenizer& tokenizer, const json::Value& config,
                                               const json::Value& from_file) = nullptr;
  // For a class whose default extra special tokens depend on the config (T5's <extra_id_N>, as many as
  // extra_ids): they, in place of defaults.extra. The config's own extra_special_tokens win over either.
  std::vector<std::string> (*extra_special_tokens)(const json::Value& config) = nullptr;
  // For a class whose special tokens go beyond what the config names (language codes, entity tokens):
  // completes those read from the config (defaults applied) before they join the added vocabulary.
  void (*special_tokens)(SpecialTokens& tokens, const json::Value& config) = nullptr;
  // The class's own "<name>_token" arguments (CodeLlama's prefix_token ...) with their defaults, in the order
  // the class passes them to Transformers' base class, which orders the model-specific special tokens.
  std::vector<std::pair<std::string_view, std::string_view>> own_tokens = {};
  // For a class whose decode does more than the tokenizers library's (CLIP drops its end-of-word suffix,
  // Whisper its timestamps, LASR repeats and pads): the text of ids, given the library's decode of the ids
  // it keeps.
  std::string (*decode)(const Tokenizer& tokenizer, const std::vector<int64_t>& ids, bool skip_special_tokens,
                        const std::function<std::string(const std::vector<int64_t>&)>& backend) = nullptr;
};

// A special token as tokenizer_config.json writes it: "<s>", {"content": "<s>", ...} or null.
std::optional<std::string> special_token_string(const json::Value& v);

// The class of that name among those tfm reproduces (tokenizer_class_choice.h picks the name); nullptr for
// one it does not.
const TokenizerClass* find_tokenizer_class(std::string_view tokenizer_class);

}  // namespace tfm::tokenizer

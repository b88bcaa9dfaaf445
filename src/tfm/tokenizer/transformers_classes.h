// Transformers' tokenizer classes that rebuild their pipeline in __init__ instead of taking tokenizer.json's
// (LlamaTokenizer ignores the file's normalizer and uses Metaspace, for one). Each entry rewrites the parsed
// tokenizer.json the way its class would, and names the class's default special tokens.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/io/json.h"
#include "tfm/tokenizer/tokenizer.h"
#include "tfm/tokenizer/tokenizer_json.h"

namespace tfm::tokenizer {

struct TokenizerClass {
  std::string_view name;  // tokenizer_class without the "Fast" suffix
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
  // For a class whose special tokens depend on the config beyond the named ones (NLLB's language codes when
  // the config lists no extra tokens): changes those read from the config over the defaults.
  void (*special_tokens)(SpecialTokens& special, const json::Value& config) = nullptr;
  // For a class whose decode does more than the tokenizers library's (CLIP drops its end-of-word suffix,
  // Whisper its timestamps): the text of ids, given the library's decode of the ids it keeps.
  std::string (*decode)(const Tokenizer& tokenizer, const std::vector<int64_t>& ids, bool skip_special_tokens,
                        const std::function<std::string(const std::vector<int64_t>&)>& backend) = nullptr;
};

// A special token as tokenizer_config.json writes it: "<s>", {"content": "<s>", ...} or null.
std::optional<std::string> special_token_string(const json::Value& v);

// nullptr for a class that uses tokenizer.json as it is (TokenizersBackend and classes without __init__).
const TokenizerClass* find_tokenizer_class(std::string_view tokenizer_class);

}  // namespace tfm::tokenizer

// The tokenizer of a model folder, as Transformers' AutoTokenizer gives it: the tokenizer.json pipeline
// (normalizer -> added tokens -> pre-tokenizer -> model -> post-processor; decoder for the way back) with
// tokenizer_config.json applied on top (special tokens, add_bos_token / add_eos_token, the class's own
// pipeline where Transformers rebuilds it, clean_up_tokenization_spaces, model_max_length).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/io/json.h"

namespace tfm::tokenizer {

class Normalizer;
class PreTokenizer;
class Model;
class PostProcessor;
class Decoder;
class AddedVocabulary;
struct AddedToken;
struct TokenizerJson;
struct TokenizerClass;

// The named special tokens of Transformers (bos_token ... mask_token); unset when the tokenizer has none.
struct SpecialTokens {
  std::optional<std::string> bos, eos, unk, sep, pad, cls, mask;
  std::vector<std::string> extra;  // extra_special_tokens (formerly additional_special_tokens)
  // Transformers' model-specific special tokens, (config key, token): the config's other "*_token" keys
  // (LUKE's entity_unk_token). They come after the named tokens and before the extra ones.
  std::vector<std::pair<std::string, std::string>> model_specific = {};
};

class Tokenizer {
 public:
  // A tokenizer.json as the Rust tokenizers library reads it (Tokenizer.from_file), without Transformers'
  // tokenizer_config.json layer. Errors name the file and the bad component or field.
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_json(const TokenizerJson& tokenizer_json);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // tokenizer(text, add_special_tokens=...)["input_ids"]. Invalid UTF-8 is read with U+FFFD replacements.
  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens = true) const;
  std::vector<std::vector<int64_t>> encode_batch(const std::vector<std::string>& texts,
                                                 bool add_special_tokens = true) const;
  // tokenizer.decode(ids, skip_special_tokens=...). Ids outside the vocabulary are left out, as in
  // Transformers; a negative id or one past 2^32 - 1 is an error (Transformers' OverflowError).
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens = false) const;

  // nullopt for an id with no token / a token with no id (and no unk token).
  std::vector<std::optional<std::string>> convert_ids_to_tokens(const std::vector<int64_t>& ids) const;
  std::vector<std::optional<int64_t>> convert_tokens_to_ids(const std::vector<std::string>& tokens) const;
  std::optional<int64_t> token_to_id(std::string_view token) const;  // no unk fallback
  std::optional<std::string> id_to_token(int64_t id) const;

  const SpecialTokens& special_tokens() const { return special_; }
  const std::optional<std::string>& bos_token() const { return special_.bos; }
  const std::optional<std::string>& eos_token() const { return special_.eos; }
  const std::optional<std::string>& pad_token() const { return special_.pad; }
  const std::optional<std::string>& unk_token() const { return special_.unk; }
  std::optional<int64_t> bos_token_id() const { return special_id(special_.bos); }
  std::optional<int64_t> eos_token_id() const { return special_id(special_.eos); }
  std::optional<int64_t> pad_token_id() const { return special_id(special_.pad); }
  std::optional<int64_t> unk_token_id() const { return special_id(special_.unk); }
  // The named special tokens, the model-specific ones, then the extra ones, without repeats (Transformers'
  // all_special_tokens / _ids).
  std::vector<std::string> all_special_tokens() const;
  std::vector<int64_t> all_special_ids() const;

  size_t vocab_size() const;  // the model's vocabulary, without added tokens (Transformers' vocab_size)
  size_t size() const;        // with added tokens (len(tokenizer))
  int64_t model_max_length() const { return model_max_length_; }
  // tokenizer_config.json (an empty object when the folder has none); the chat layer reads chat_template
  // here.
  const json::Value& config() const { return config_; }

 private:
  Tokenizer();
  friend struct AutoTokenizer;

  std::optional<int64_t> special_id(const std::optional<std::string>& token) const;
  // The tokenizers library's decode (Transformers' backend_tokenizer.decode), before the class's own steps.
  std::string backend_decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const;
  // Adds an added token (or resets the settings of one already there), taking the id it has, the model's id
  // for a token in its vocabulary, or the next free id.
  void add_token(AddedToken token);
  // What the added vocabulary looks for: the content, through the normalizer when the token is normalized.
  std::string match_text(const AddedToken& token) const;
  void encode_text(std::string_view text, bool at_start, std::vector<int32_t>& ids) const;

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<AddedVocabulary> added_;
  bool model_is_bpe_ = false;

  // Transformers' layer.
  const TokenizerClass* class_ = nullptr;  // the class whose decode steps apply, if it has any
  SpecialTokens special_;
  bool split_special_tokens_ = false;
  bool clean_up_tokenization_spaces_ = false;
  int64_t model_max_length_ = 1000000000000000000;  // Transformers' VERY_LARGE_INTEGER, clipped to int64
  json::Value config_ = json::Object{};
};

// A model folder as transformers.AutoTokenizer.from_pretrained reads it: tokenizer.json (required) and
// tokenizer_config.json, special_tokens_map.json, chat_template.jinja when present. Local folders only.
// The class is chosen as Transformers chooses it, from config.json (when the folder has one) and
// tokenizer_config.json; name_or_path (default: dir) is the Hub id or path the folder was asked for.
struct AutoTokenizer {
  static Tokenizer from_pretrained(const std::string& dir, std::string_view name_or_path = {});
};

}  // namespace tfm::tokenizer

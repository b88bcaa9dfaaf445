// Transformers' tokenizer classes that build their own pipeline in __init__, in groups of one file each, and
// what their rebuilds share. transformers_classes.cpp puts the groups together.
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/transformers_classes.h"

namespace tfm::tokenizer::classes {

// The groups.
void add_decoder_bpe_classes(std::vector<TokenizerClass>& out);  // Llama, Qwen2, GPT-2 and other decoder LMs
void add_bert_like_classes(std::vector<TokenizerClass>& out);    // BERT's WordPiece classes and others
void add_unigram_a_classes(std::vector<TokenizerClass>& out);    // T5, ALBERT, XLM-R and other SentencePiece
void add_unigram_b_classes(std::vector<TokenizerClass>& out);    // DeBERTa-v2, mBART-50, Pegasus, ...
void add_encoder_bpe_classes(std::vector<TokenizerClass>& out);  // RoBERTa, Whisper, CLIP, NLLB and others

// Replaces the file's model with `type` over the file's vocabulary (and merges, for BPE), with the class's
// own options (JSON members), and clears the normalizer, pre-tokenizer and decoder: the class sets those it
// has. The post-processor stays, as Transformers takes it from the file. Scores are read as Python reads
// them.
void rebuild_model(TokenizerJson& tj, std::string_view type, std::string_view options);

// GPT-2's byte-level BPE (no unk token, no affixes) with a ByteLevel pre-tokenizer (GPT-2's regex) and
// decoder: the pipeline of GPT2Tokenizer, RobertaTokenizer and the classes built like them.
void rebuild_byte_level_bpe(TokenizerJson& tj, bool add_prefix_space);

// The file's SentencePiece charsmap normalizer (alone or in a Sequence), which Transformers hands to the
// class (convert_to_native_format's _spm_precompiled_charsmap); null when there is none or it is empty (falsy
// in Python). Read it before rebuild_model clears the normalizer.
json::Value precompiled_normalizer(const TokenizerJson& tj);

// A special token of a template and its id.
using TokenId = std::pair<std::string, int64_t>;

// processors.TemplateProcessing(single, pair, special_tokens): pieces "$A", "$B:1", "[CLS]:0" (type id 0
// where none is given), each special token with its id (an error where it has none, as in Python).
json::Value template_processing(const std::vector<std::string>& single, const std::vector<std::string>& pair,
                                const std::vector<std::pair<std::string, std::optional<int64_t>>>& special);

// The TemplateProcessing "prefix $A suffix" of these tokens.
json::Value template_around(const std::vector<TokenId>& prefix, const std::vector<TokenId>& suffix);

// template_around of the items before and after "$A", each a special token with its id in t (one t lacks,
// or nullopt, is left out).
json::Value special_template(const Tokenizer& t, std::initializer_list<std::optional<std::string>> items);

// processors.RobertaProcessing: "cls $A sep".
json::Value roberta_processing(const TokenId& sep, const TokenId& cls, bool trim_offsets,
                               bool add_prefix_space);

// Transformers' update_post_processor: "bos $A eos", each special token where asked for and t has it.
json::Value bos_eos_template(const Tokenizer& t, bool add_bos, bool add_eos);

// Unigram(vocab, unk_id=unk_id, byte_fallback=False) over the file's vocabulary (rebuild_model).
void rebuild_unigram(TokenizerJson& tj, int64_t unk_id);

// Calls visit(index, piece, score) for the entries of tokenizer.json's Unigram vocabulary, in order, until it
// returns false.
void for_each_unigram_entry(const TokenizerJson& tj,
                            const std::function<bool(size_t, std::string_view, double)>& visit);
// Python's vocab.index((piece, score), start) over the (piece, score) list Transformers extracts from
// tokenizer.json; nullopt where it raises.
std::optional<int64_t> unigram_index(const TokenizerJson& tj, std::string_view piece, double score = 0.0,
                                     size_t start = 0);
// The index of the first entry of `piece`, whatever its score, for classes that look up their unk_token.
std::optional<int64_t> unigram_piece_id(const TokenizerJson& tj, std::string_view piece);

// A SentencePiece Metaspace (replacement U+2581), as pre-tokenizer and as decoder.
json::Value metaspace(std::string_view prepend_scheme, bool split = true);
// The pre-tokenizer and decoder of most Unigram classes: WhitespaceSplit then Metaspace, and a Metaspace
// decoder, both with prepend_scheme.
void set_whitespace_metaspace(TokenizerJson& tj, std::string_view prepend_scheme);

// Metaspace's prepend_scheme of a SentencePiece class: "always" unless add_prefix_space (true by default) is
// off.
std::string prefix_scheme(const json::Value& config, std::string_view without_prefix = "never");
// SentencePiece's `` and '' to a double quote, as two Replace normalizers.
void append_quote_replaces(json::Array& normalizers);

// A BPE over BERT's words (its normalizer, lowercasing or not, and pre-tokenizer) with "</w>" ending each
// word, unk from the config: the original GPT and HerBERT.
void rebuild_words_bpe(TokenizerJson& tj, const json::Value& config, bool lowercase);

// The config's value for a special-token argument that is also a pipeline option (unk_token of a model).
std::string special_token_or(const json::Value& config, std::string_view key, std::string_view fallback);

// Appends token unless tokens has it (a class adding to its additional special tokens).
void append_missing(std::vector<std::string>& tokens, const std::string& token);

// LUKE's and mLUKE's entity tokens, the model-specific special tokens the classes pass themselves
// (TokenizerClass::own_tokens), in their order with their defaults.
inline constexpr std::pair<std::string_view, std::string_view> kLukeEntityTokens[] = {
    {"entity_unk_token", "[UNK]"},
    {"entity_pad_token", "[PAD]"},
    {"entity_mask_token", "[MASK]"},
    {"entity_mask2_token", "[MASK2]"}};
// The entity_token_1 / _2 LUKE and mLUKE add to the extra special tokens.
void append_luke_entity_extras(SpecialTokens& s, const json::Value& config);

}  // namespace tfm::tokenizer::classes

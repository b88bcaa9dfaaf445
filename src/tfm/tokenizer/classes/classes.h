// Transformers' tokenizer classes that build their own pipeline in __init__, in groups of one file each, and
// what their rebuilds share. transformers_classes.cpp puts the groups together.
#pragma once

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

// Replaces the file's model with `type` over the file's vocabulary (and merges, for BPE), with the class's
// own options (JSON members), and clears the normalizer, pre-tokenizer and decoder: the class sets those it
// has. The post-processor stays, as Transformers takes it from the file. Scores are read as Python reads
// them.
void rebuild_model(TokenizerJson& tj, std::string_view type, std::string_view options);

// The file's SentencePiece charsmap normalizer (alone or in a Sequence), which Transformers hands to the
// class (convert_to_native_format's _spm_precompiled_charsmap); null when there is none or it is empty (falsy
// in Python). Read it before rebuild_model clears the normalizer.
json::Value file_precompiled(const TokenizerJson& tj);

// Transformers' update_post_processor: "bos $A eos" as a TemplateProcessing, each special token where asked
// for and the tokenizer has it.
json::Value bos_eos_template(const Tokenizer& t, bool add_bos, bool add_eos);

// The config's value for a special-token argument that is also a pipeline option (unk_token of a model).
std::string special_token_or(const json::Value& config, std::string_view key, std::string_view fallback);

// processors.TemplateProcessing(single, pair, special_tokens): pieces "$A", "$B:1", "[CLS]:0" (type id 0
// where none is given), each special token with its id (an error where it has none, as in Python).
json::Value template_processing(const std::vector<std::string>& single, const std::vector<std::string>& pair,
                                const std::vector<std::pair<std::string, std::optional<int64_t>>>& special);

// The file's Precompiled normalizer, alone or in a top-level Sequence, or null: Transformers hands its
// charsmap to a SentencePiece class as _spm_precompiled_charsmap. Read it before rebuild_model clears it.
json::Value precompiled_normalizer(const TokenizerJson& tj);

// The SentencePiece pre-tokenizer and decoder of the Unigram classes: WhitespaceSplit then Metaspace
// ("\u2581", split), and a Metaspace decoder, both with prepend_scheme.
void set_whitespace_metaspace(TokenizerJson& tj, std::string_view prepend_scheme);

// The index of `piece` in the file's Unigram vocabulary ([piece, score] pairs), for classes that look up
// their unk_token there.
std::optional<int64_t> unigram_piece_id(const TokenizerJson& tj, std::string_view piece);

}  // namespace tfm::tokenizer::classes

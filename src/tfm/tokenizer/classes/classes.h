// Transformers' tokenizer classes that build their own pipeline in __init__, in groups of one file each, and
// what their rebuilds share. transformers_classes.cpp puts the groups together.
#pragma once

#include <string_view>
#include <vector>

#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/transformers_classes.h"

namespace tfm::tokenizer::classes {

// The groups.
void add_decoder_bpe_classes(std::vector<TokenizerClass>& out);  // Llama, Qwen2, GPT-2 and other decoder LMs
void add_bert_like_classes(std::vector<TokenizerClass>& out);    // BERT's WordPiece classes and others

// Replaces the file's model with `type` over the file's vocabulary (and merges, for BPE), with the class's
// own options (JSON members), and clears the normalizer, pre-tokenizer and decoder: the class sets those it
// has. The post-processor stays, as Transformers takes it from the file.
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

}  // namespace tfm::tokenizer::classes

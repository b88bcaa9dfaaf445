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
void add_encoder_bpe_classes(std::vector<TokenizerClass>& out);  // RoBERTa, Whisper, CLIP, NLLB and others

// Replaces the file's model with `type` over the file's vocabulary (and merges, for BPE), with the class's
// own options (JSON members), and clears the normalizer, pre-tokenizer and decoder: the class sets those it
// has. The post-processor stays, as Transformers takes it from the file.
void rebuild_model(TokenizerJson& tj, std::string_view type, std::string_view options);

// GPT-2's byte-level BPE (no unk token, no affixes) with a ByteLevel pre-tokenizer (GPT-2's regex) and
// decoder: the pipeline of GPT2Tokenizer, RobertaTokenizer and the classes built like them.
void rebuild_byte_level_bpe(TokenizerJson& tj, bool add_prefix_space);

// The file's Precompiled normalizer (alone or in a Sequence): Transformers hands its charsmap to the class
// (_spm_precompiled_charsmap). nullopt when the file has none.
std::optional<json::Value> precompiled_normalizer(const TokenizerJson& tj);

// A special token of a template and its id.
using TemplateToken = std::pair<std::string, int64_t>;
// A TemplateProcessing of the prefix tokens, the sequence, then the suffix tokens.
json::Value template_processing(const std::vector<TemplateToken>& prefix,
                                const std::vector<TemplateToken>& suffix);

// Transformers' update_post_processor: "bos $A eos" as a TemplateProcessing, each special token where asked
// for and the tokenizer has it.
json::Value bos_eos_template(const Tokenizer& t, bool add_bos, bool add_eos);

// The config's value for a special-token argument that is also a pipeline option (unk_token of a model).
std::string special_token_or(const json::Value& config, std::string_view key, std::string_view fallback);

}  // namespace tfm::tokenizer::classes

// Decoder language models' BPE tokenizer classes: LlamaTokenizer, Qwen2Tokenizer, GPT2Tokenizer,
// GPTNeoXTokenizer, GemmaTokenizer. Each function mirrors the class's __init__ in Transformers 5.
#include "tfm/tokenizer/classes/classes.h"

namespace tfm::tokenizer::classes {
namespace {

void rebuild_llama(TokenizerJson& tj, const json::Value& config) {
  rebuild_model(tj, "BPE", R"({"unk_token": null, "fuse_unk": true, "byte_fallback": true})");
  const bool add_prefix_space = bool_or(config, "add_prefix_space", true);
  const bool legacy = bool_or(config, "legacy", false);
  const char* scheme = !add_prefix_space ? "never" : legacy ? "always" : "first";
  tj.tree.set(
      "pre_tokenizer",
      json::parse(std::string(R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": ")") +
                  scheme + R"(", "split": false})"));
  json::Value decoder = json::parse(R"({"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"}]})");
  if (add_prefix_space)
    decoder.find("decoders")
        ->as_array()
        .push_back(json::parse(R"({"type": "Strip", "content": " ", "start": 1, "stop": 0})"));
  tj.tree.set("decoder", std::move(decoder));
}

void rebuild_qwen2(TokenizerJson& tj, const json::Value& config) {
  rebuild_model(
      tj, "BPE",
      R"({"unk_token": null, "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false})");
  tj.tree.set("normalizer", json::parse(R"({"type": "NFC"})"));
  json::Value pre = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
       "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "use_regex": false}]})");
  pre.find("pretokenizers")
      ->as_array()[1]
      .set("add_prefix_space", bool_or(config, "add_prefix_space", false));
  tj.tree.set("pre_tokenizer", std::move(pre));
  tj.tree.set("decoder", json::parse(R"({"type": "ByteLevel"})"));
}

void rebuild_gpt2(TokenizerJson& tj, const json::Value& config) {
  rebuild_byte_level_bpe(tj, bool_or(config, "add_prefix_space", false));
}

void rebuild_gpt_neox(TokenizerJson& tj, const json::Value& config) {
  rebuild_byte_level_bpe(tj, bool_or(config, "add_prefix_space", false));
  tj.tree.set("normalizer", json::parse(R"({"type": "NFC"})"));
}

void rebuild_gemma(TokenizerJson& tj, const json::Value& config) {
  json::Value options = json::parse(R"({"fuse_unk": true, "byte_fallback": true})");
  options.set("unk_token", special_token_or(config, "unk_token", "<unk>"));
  rebuild_model(tj, "BPE", json::dump(options));
  tj.tree.set("normalizer",
              json::parse(R"({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})"));
  tj.tree.set(
      "pre_tokenizer",
      json::parse(
          R"({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false})"));
  tj.tree.set("decoder", json::parse(R"({"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]})"));
}

}  // namespace

void add_decoder_bpe_classes(std::vector<TokenizerClass>& out) {
  const TokenizerClass group[] = {
      {"LlamaTokenizer", {"<s>", "</s>", "<unk>", {}, {}, {}, {}, {}}, rebuild_llama},
      {"Qwen2Tokenizer",
       {{}, "<|endoftext|>", "<|endoftext|>", {}, "<|endoftext|>", {}, {}, {}},
       rebuild_qwen2,
       true},
      {"GPT2Tokenizer",
       {"<|endoftext|>", "<|endoftext|>", "<|endoftext|>", {}, {}, {}, {}, {}},
       rebuild_gpt2},
      {"GPTNeoXTokenizer",
       {"<|endoftext|>", "<|endoftext|>", "<|endoftext|>", {}, "<|padding|>", {}, {}, {}},
       rebuild_gpt_neox},
      {"GemmaTokenizer", {"<bos>", "<eos>", "<unk>", {}, "<pad>", {}, "<mask>", {}}, rebuild_gemma},
  };
  out.insert(out.end(), std::begin(group), std::end(group));
}

}  // namespace tfm::tokenizer::classes

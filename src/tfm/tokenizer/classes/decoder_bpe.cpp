// Decoder language models' BPE tokenizer classes: Llama, CodeLlama, Qwen2, Qwen3.5, GPT-2, GPT-NeoX, Gemma,
// Cohere, CodeGen and OpenAI GPT. Each function mirrors the class's __init__ in Transformers 5.
#include "tfm/tokenizer/classes/classes.h"

namespace tfm::tokenizer::classes {
namespace {

// U+2581 back to spaces, byte tokens back to bytes, and the first space dropped when `strip_first`.
json::Value sentencepiece_decoder(bool strip_first) {
  json::Value decoder = json::parse(R"({"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"}]})");
  if (strip_first)
    decoder.find("decoders")
        ->as_array()
        .push_back(json::parse(R"({"type": "Strip", "content": " ", "start": 1, "stop": 0})"));
  return decoder;
}

void rebuild_llama(TokenizerJson& tj, const json::Value& config) {
  rebuild_model(tj, "BPE", R"({"unk_token": null, "fuse_unk": true, "byte_fallback": true})");
  const bool add_prefix_space = bool_or(config, "add_prefix_space", true);
  const bool legacy = bool_or(config, "legacy", false);
  tj.tree.set("pre_tokenizer", metaspace(!add_prefix_space ? "never" : legacy ? "always" : "first", false));
  tj.tree.set("decoder", sentencepiece_decoder(add_prefix_space));
}

void rebuild_code_llama(TokenizerJson& tj, const json::Value& config) {
  json::Value options = json::parse(R"({"fuse_unk": true, "byte_fallback": true})");
  options.set("unk_token", special_token_or(config, "unk_token", "<unk>"));
  rebuild_model(tj, "BPE", json::dump(options));
  tj.tree.set("pre_tokenizer",
              metaspace(bool_or(config, "add_prefix_space", true) ? "first" : "never", false));
  tj.tree.set("decoder", sentencepiece_decoder(true));
}

// CodeLlamaTokenizer always passes add_bos_token (True unless given), so Transformers rebuilds the template.
std::optional<json::Value> code_llama_post_processor(const Tokenizer& t, const json::Value&,
                                                     const json::Value&) {
  return bos_eos_template(t, true, false);
}

// Qwen2Tokenizer and Qwen3_5Tokenizer: NFC, a split by `pattern`, then bytes without ByteLevel's own regex.
void rebuild_qwen(TokenizerJson& tj, const json::Value& config, std::string_view pattern) {
  rebuild_model(
      tj, "BPE",
      R"({"unk_token": null, "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false})");
  tj.tree.set("normalizer", json::parse(R"({"type": "NFC"})"));
  json::Value split =
      json::parse(R"({"type": "Split", "pattern": {}, "behavior": "Isolated", "invert": false})");
  split.find("pattern")->set("Regex", std::string(pattern));
  json::Value bytes = json::parse(R"({"type": "ByteLevel", "use_regex": false})");
  bytes.set("add_prefix_space", bool_or(config, "add_prefix_space", false));
  json::Value pre = json::parse(R"({"type": "Sequence"})");
  pre.set("pretokenizers", json::Array{std::move(split), std::move(bytes)});
  tj.tree.set("pre_tokenizer", std::move(pre));
  tj.tree.set("decoder", json::parse(R"({"type": "ByteLevel"})"));
}

void rebuild_qwen2(TokenizerJson& tj, const json::Value& config) {
  rebuild_qwen(
      tj, config,
      R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re");
}

void rebuild_qwen3_5(TokenizerJson& tj, const json::Value& config) {  // marks join letters
  rebuild_qwen(
      tj, config,
      R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re");
}

void rebuild_gpt2(TokenizerJson& tj, const json::Value& config) {  // also CodeGenTokenizer
  rebuild_byte_level_bpe(tj, bool_or(config, "add_prefix_space", false));
}

void rebuild_gpt_neox(TokenizerJson& tj, const json::Value& config) {
  rebuild_byte_level_bpe(tj, bool_or(config, "add_prefix_space", false));
  tj.tree.set("normalizer", json::parse(R"({"type": "NFC"})"));
}

// GPT-NeoX's pipeline with each digit split off before the bytes.
void rebuild_cohere(TokenizerJson& tj, const json::Value& config) {
  rebuild_gpt_neox(tj, config);
  json::Value pre = json::parse(
      R"({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}]})");
  pre.find("pretokenizers")->as_array().push_back(*tj.tree.find("pre_tokenizer"));
  tj.tree.set("pre_tokenizer", std::move(pre));
}

void rebuild_openai_gpt(TokenizerJson& tj, const json::Value& config) {
  rebuild_words_bpe(tj, config, true);
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
  const SpecialTokens gpt2 = {"<|endoftext|>", "<|endoftext|>", "<|endoftext|>", {}, {}, {}, {}, {}};
  const TokenizerClass group[] = {
      {"LlamaTokenizer", {"<s>", "</s>", "<unk>", {}, {}, {}, {}, {}}, rebuild_llama},
      {.name = "CodeLlamaTokenizer",
       .defaults = {"<s>", "</s>", "<unk>", {}, {}, {}, {}, {}},
       .rebuild = rebuild_code_llama,
       .post_processor = code_llama_post_processor,
       .own_tokens = {{"prefix_token", "\u2581<PRE>"},
                      {"middle_token", "\u2581<MID>"},
                      {"suffix_token", "\u2581<SUF>"},
                      {"eot_token", "\u2581<EOT>"},
                      {"fill_token", "<FILL_ME>"}}},
      {"Qwen2Tokenizer",
       {{}, "<|endoftext|>", "<|endoftext|>", {}, "<|endoftext|>", {}, {}, {}},
       rebuild_qwen2,
       true},
      {"Qwen3_5Tokenizer",
       {{}, "<|endoftext|>", "<|endoftext|>", {}, "<|endoftext|>", {}, {}, {}},
       rebuild_qwen3_5},
      {"GPT2Tokenizer", gpt2, rebuild_gpt2},
      {"CodeGenTokenizer", gpt2, rebuild_gpt2},
      {"GPTNeoXTokenizer",
       {"<|endoftext|>", "<|endoftext|>", "<|endoftext|>", {}, "<|padding|>", {}, {}, {}},
       rebuild_gpt_neox},
      {"GemmaTokenizer", {"<bos>", "<eos>", "<unk>", {}, "<pad>", {}, "<mask>", {}}, rebuild_gemma},
      {"CohereTokenizer",  // _post_init() adds every special token again
       {"<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>", "<UNK>", "<SEP>", "<PAD>", "<CLS>", "<MASK_TOKEN>", {}},
       rebuild_cohere,
       true},
      {"OpenAIGPTTokenizer", {{}, {}, "<unk>", {}, {}, {}, {}, {}}, rebuild_openai_gpt},
  };
  out.insert(out.end(), std::begin(group), std::end(group));
}

}  // namespace tfm::tokenizer::classes

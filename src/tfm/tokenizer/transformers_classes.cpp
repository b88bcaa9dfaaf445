#include "tfm/tokenizer/transformers_classes.h"

#include "tfm/tokenizer/json_fields.h"

namespace tfm::tokenizer {
namespace {

// A BPE model over the file's vocabulary and merges, with the class's own options (given as JSON members),
// and no normalizer, pre-tokenizer or decoder yet: the class sets those it has.
void rebuild_bpe(TokenizerJson& tj, std::string_view options) {
  json::Value* found = tj.tree.find("model");
  check(found != nullptr, "missing field 'model'");
  check(!tj.vocab.empty(), "model: missing field 'vocab'");
  json::Value model = json::parse(options);
  model.set("type", "BPE");
  *found = std::move(model);
  if (tj.merges.empty()) tj.merges = "[]";
  for (const char* stage : {"normalizer", "pre_tokenizer", "decoder"}) tj.tree.set(stage, nullptr);
}

void rebuild_llama(TokenizerJson& tj, const json::Value& config) {
  rebuild_bpe(tj, R"({"unk_token": null, "fuse_unk": true, "byte_fallback": true})");
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
  rebuild_bpe(
      tj,
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
  rebuild_bpe(tj, R"({"continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false})");
  json::Value pre = json::parse(R"({"type": "ByteLevel"})");
  pre.set("add_prefix_space", bool_or(config, "add_prefix_space", false));
  tj.tree.set("pre_tokenizer", std::move(pre));
  tj.tree.set("decoder", json::parse(R"({"type": "ByteLevel"})"));
}

void rebuild_gpt_neox(TokenizerJson& tj, const json::Value& config) {
  rebuild_bpe(tj, R"({"continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false})");
  tj.tree.set("normalizer", json::parse(R"({"type": "NFC"})"));
  json::Value pre = json::parse(R"({"type": "ByteLevel"})");
  pre.set("add_prefix_space", bool_or(config, "add_prefix_space", false));
  tj.tree.set("pre_tokenizer", std::move(pre));
  tj.tree.set("decoder", json::parse(R"({"type": "ByteLevel"})"));
}

void rebuild_gemma(TokenizerJson& tj, const json::Value& config) {
  json::Value options = json::parse(R"({"fuse_unk": true, "byte_fallback": true})");
  const json::Value* unk = config.find("unk_token");
  options.set("unk_token",
              unk ? json::Value(special_token_string(*unk).value_or("<unk>")) : json::Value("<unk>"));
  rebuild_bpe(tj, json::dump(options));
  tj.tree.set("normalizer",
              json::parse(R"({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})"));
  tj.tree.set(
      "pre_tokenizer",
      json::parse(
          R"({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false})"));
  tj.tree.set("decoder", json::parse(R"({"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]})"));
}

const TokenizerClass kClasses[] = {
    {"LlamaTokenizer", {"<s>", "</s>", "<unk>", {}, {}, {}, {}, {}}, rebuild_llama},
    {"Qwen2Tokenizer",
     {{}, "<|endoftext|>", "<|endoftext|>", {}, "<|endoftext|>", {}, {}, {}},
     rebuild_qwen2,
     true},
    {"GPT2Tokenizer", {"<|endoftext|>", "<|endoftext|>", "<|endoftext|>", {}, {}, {}, {}, {}}, rebuild_gpt2},
    {"GPTNeoXTokenizer",
     {"<|endoftext|>", "<|endoftext|>", "<|endoftext|>", {}, "<|padding|>", {}, {}, {}},
     rebuild_gpt_neox},
    {"GemmaTokenizer", {"<bos>", "<eos>", "<unk>", {}, "<pad>", {}, "<mask>", {}}, rebuild_gemma},
};

}  // namespace

std::optional<std::string> special_token_string(const json::Value& v) {
  if (v.is_null()) return std::nullopt;
  if (v.is_object()) return required(v, "content").as_string();
  return v.as_string();
}

const TokenizerClass* find_tokenizer_class(std::string_view name) {
  if (name.size() > 4 && name.substr(name.size() - 4) == "Fast") name.remove_suffix(4);
  for (const TokenizerClass& c : kClasses)
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace tfm::tokenizer

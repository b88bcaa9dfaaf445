// Encoder models' tokenizer classes around BERT's pipeline and the other classes of this group:
// BertTokenizer, FunnelTokenizer, MPNetTokenizer, SplinterTokenizer, LayoutLMv2Tokenizer (WordPiece),
// HerbertTokenizer, EsmcTokenizer, Siglip2Tokenizer, Tipsv2Tokenizer, NougatTokenizer (BPE). Each function
// mirrors the class's __init__ in Transformers 5.
#include <algorithm>
#include <iterator>

#include "tfm/tokenizer/classes/classes.h"

namespace tfm::tokenizer::classes {
namespace {

// BertTokenizer's pipeline, which the WordPiece classes copy: only FunnelTokenizer reads clean_text and
// wordpieces_prefix (and that prefix only reaches the decoder: its WordPiece model keeps "##").
void rebuild_bert_pipeline(TokenizerJson& tj, const json::Value& config, std::string_view default_unk,
                           bool clean_text, const std::string& decoder_prefix) {
  json::Value model = json::Object{};
  model.set("unk_token", special_token_or(config, "unk_token", default_unk));
  rebuild_model(tj, "WordPiece", json::dump(model));
  json::Value normalizer = json::parse(R"({"type": "BertNormalizer"})");
  normalizer.set("clean_text", clean_text);
  normalizer.set("handle_chinese_chars", bool_or(config, "tokenize_chinese_chars", true));
  // null: strip accents where lowercasing, as the original BERT
  const json::Value* strip_accents = config.find("strip_accents");
  normalizer.set("strip_accents", strip_accents ? *strip_accents : json::Value());
  normalizer.set("lowercase", bool_or(config, "do_lower_case", true));
  tj.tree.set("normalizer", std::move(normalizer));
  tj.tree.set("pre_tokenizer", json::parse(R"({"type": "BertPreTokenizer"})"));
  json::Value decoder = json::parse(R"({"type": "WordPiece", "cleanup": true})");
  decoder.set("prefix", decoder_prefix);
  tj.tree.set("decoder", std::move(decoder));
}

void rebuild_bert(TokenizerJson& tj, const json::Value& config) {
  rebuild_bert_pipeline(tj, config, "[UNK]", true, "##");
}

void rebuild_funnel(TokenizerJson& tj, const json::Value& config) {
  rebuild_bert_pipeline(tj, config, "<unk>", bool_or(config, "clean_text", true),
                        string_or(config, "wordpieces_prefix", "##"));
}

// A special token with its id, as post-processors list them; nullopt when the tokenizer lacks the token.
std::optional<TokenId> token_and_id(const Tokenizer& t, const std::optional<std::string>& token) {
  if (!token) return std::nullopt;
  const std::optional<int64_t> id = t.token_to_id(*token);
  if (!id) return std::nullopt;
  return TokenId{*token, *id};
}

// "cls $A sep", set after super().__init__ by the WordPiece classes, whose special tokens it names are in
// the vocabulary by then. Without cls or sep the file's post-processor stays (SplinterTokenizer returns
// early; the others would write the token "None").
std::optional<json::Value> cls_sep_template(const Tokenizer& t, const json::Value&, const json::Value&) {
  const auto cls = token_and_id(t, t.special_tokens().cls);
  const auto sep = token_and_id(t, t.special_tokens().sep);
  if (!cls || !sep) return std::nullopt;
  return template_around({*cls}, {*sep});
}

// RobertaProcessing: "<s> $A </s>".
std::optional<json::Value> mpnet_post_processor(const Tokenizer& t, const json::Value&, const json::Value&) {
  const auto cls = token_and_id(t, t.special_tokens().cls);
  const auto sep = token_and_id(t, t.special_tokens().sep);
  if (!cls || !sep) return std::nullopt;
  return roberta_processing(*sep, *cls, true, false);
}

// The DPR tokenizers take do_lower_case for themselves and leave BertTokenizer its default, lowercasing.
void rebuild_dpr(TokenizerJson& tj, const json::Value& config) {
  json::Value bert_config = config;
  bert_config.set("do_lower_case", true);
  rebuild_bert(tj, bert_config);
}

void rebuild_herbert(TokenizerJson& tj, const json::Value& config) {
  rebuild_words_bpe(tj, config, false);
}

// BertProcessing with the ids of HerBERT's vocabulary written in, whatever the tokenizer's are.
std::optional<json::Value> herbert_post_processor(const Tokenizer& t, const json::Value&,
                                                  const json::Value&) {
  json::Value out = json::parse(R"({"type": "BertProcessing"})");
  out.set("sep", json::Array{json::Value(t.special_tokens().sep.value_or("")), json::Value(int64_t{2})});
  out.set("cls", json::Array{json::Value(t.special_tokens().cls.value_or("")), json::Value(int64_t{0})});
  return out;
}

// ESMC's amino-acid vocabulary (SEQUENCE_VOCAB): the class uses it whatever the file holds.
constexpr std::string_view kEsmcVocab[] = {
    "<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T", "I", "D", "P", "K",     "Q",
    "N",     "F",     "Y",     "M",     "H", "W", "C", "X", "B", "U", "Z", "O", ".", "-", "|", "<mask>"};

int64_t esmc_id(std::string_view token) {
  const auto* found = std::find(std::begin(kEsmcVocab), std::end(kEsmcVocab), token);
  check(found != std::end(kEsmcVocab), "EsmcTokenizer: '", token, "' is not in ESMC's vocabulary");
  return found - std::begin(kEsmcVocab);
}

void rebuild_esmc(TokenizerJson& tj, const json::Value& config) {
  static const std::string vocab = [] {
    json::Value v = json::Object{};
    for (std::string_view token : kEsmcVocab) v.set(std::string(token), esmc_id(token));
    return json::dump(v);
  }();
  json::Value model = json::parse(R"({"fuse_unk": false, "byte_fallback": false})");
  model.set("unk_token", special_token_or(config, "unk_token", "<unk>"));
  rebuild_model(tj, "BPE", json::dump(model));
  tj.vocab = vocab;
  tj.merges = "[]";
}

// "<cls> $A <eos>", with the ids of ESMC's vocabulary.
std::optional<json::Value> esmc_post_processor(const Tokenizer& t, const json::Value&, const json::Value&) {
  const std::string cls = t.special_tokens().cls.value_or("None");
  const std::string eos = t.special_tokens().eos.value_or("None");
  return template_around({{cls, esmc_id(cls)}}, {{eos, esmc_id(eos)}});
}

// GemmaTokenizer's pipeline with lowercasing before it.
void rebuild_siglip2(TokenizerJson& tj, const json::Value& config) {
  find_tokenizer_class("GemmaTokenizer")->rebuild(tj, config);
  json::Value normalizer = json::parse(R"({"type": "Sequence", "normalizers": [{"type": "Lowercase"}]})");
  normalizer.find("normalizers")->as_array().push_back(*tj.tree.find("normalizer"));
  tj.tree.set("normalizer", std::move(normalizer));
}

void rebuild_tipsv2(TokenizerJson& tj, const json::Value& config) {
  const json::Value precompiled = precompiled_normalizer(tj);
  rebuild_model(tj, "BPE", R"({"fuse_unk": true, "byte_fallback": true})");
  json::Value normalizer = json::parse(R"({"type": "Sequence", "normalizers": []})");
  json::Array& steps = normalizer.find("normalizers")->as_array();
  if (bool_or(config, "do_lower_case", true)) steps.push_back(json::parse(R"({"type": "Lowercase"})"));
  if (!precompiled.is_null()) steps.push_back(precompiled);
  tj.tree.set("normalizer", std::move(normalizer));
  set_whitespace_metaspace(tj, "always");  // with byte tokens back to bytes in the decoder
  json::Value decoder =
      json::parse(R"({"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]})");
  json::Array& decoders = decoder.find("decoders")->as_array();
  decoders.insert(decoders.begin(), metaspace("always"));
  tj.tree.set("decoder", std::move(decoder));
}

// The class hands its third Split a plain string, so the regex-like pattern is matched literally.
void rebuild_nougat(TokenizerJson& tj, const json::Value&) {
  rebuild_model(tj, "BPE",
                R"({"continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false})");
  tj.tree.set("normalizer", json::parse(R"({"type": "NFKC"})"));
  tj.tree.set("pre_tokenizer", json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"String": "SPL1T-TH1S-Pl3A5E"}, "behavior": "Removed", "invert": false},
      {"type": "Digits", "individual_digits": true},
      {"type": "Split", "pattern": {"String": "[\\(\\)\\[\\]\\{\\}]|([!\\\"#\\$%\\&'\\*\\+,\\-\\./:;<=>\\?\\\\\\^_`\\|\\~])\\1*"},
       "behavior": "Isolated", "invert": false},
      {"type": "Split", "pattern": {"String": "\n"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]})"));
  tj.tree.set(
      "decoder",
      json::parse(
          R"({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true})"));
}

// "<s> $A </s>". The class also turns on padding and truncation to 4096 tokens, which Transformers' encoding
// turns off again for each call.
std::optional<json::Value> nougat_post_processor(const Tokenizer& t, const json::Value&, const json::Value&) {
  return bos_eos_template(t, true, true);
}

}  // namespace

void add_bert_like_classes(std::vector<TokenizerClass>& out) {
  const SpecialTokens bert = {{}, {}, "[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]", {}};
  const TokenizerClass group[] = {
      {"BertTokenizer", bert, rebuild_bert, false, cls_sep_template},
      {"DistilBertTokenizer", bert, rebuild_bert, false, cls_sep_template},
      {"DPRContextEncoderTokenizer", bert, rebuild_dpr, false, cls_sep_template},
      {"DPRQuestionEncoderTokenizer", bert, rebuild_dpr, false, cls_sep_template},
      {"DPRReaderTokenizer", bert, rebuild_dpr, false, cls_sep_template},
      {"FunnelTokenizer",
       {"<s>", "</s>", "<unk>", "<sep>", "<pad>", "<cls>", "<mask>", {}},
       rebuild_funnel,
       false,
       cls_sep_template},
      {"MPNetTokenizer",
       {"<s>", "</s>", "[UNK]", "</s>", "<pad>", "<s>", "<mask>", {}},
       rebuild_bert,
       false,
       mpnet_post_processor},
      {"SplinterTokenizer", bert, rebuild_bert, false, cls_sep_template},
      {"LayoutLMv2Tokenizer", bert, rebuild_bert, false, cls_sep_template},
      {"HerbertTokenizer",
       {{}, {}, "<unk>", "</s>", "<pad>", "<s>", "<mask>", {}},
       rebuild_herbert,
       false,
       herbert_post_processor},
      {"EsmcTokenizer",
       {"<cls>", "<eos>", "<unk>", {}, "<pad>", "<cls>", "<mask>", {}},
       rebuild_esmc,
       false,
       esmc_post_processor},
      {"Siglip2Tokenizer", {"<bos>", "<eos>", "<unk>", {}, "<pad>", {}, "<mask>", {}}, rebuild_siglip2},
      {"Tipsv2Tokenizer", {{}, {}, "<unk>", {}, "<pad>", {}, {}, {}}, rebuild_tipsv2},
      {"NougatTokenizer",
       {"<s>", "</s>", "<unk>", {}, "<pad>", {}, {}, {}},
       rebuild_nougat,
       false,
       nougat_post_processor},
  };
  out.insert(out.end(), std::begin(group), std::end(group));
}

}  // namespace tfm::tokenizer::classes

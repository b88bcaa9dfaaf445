// SentencePiece Unigram tokenizer classes of encoder and encoder-decoder models: DebertaV2Tokenizer,
// BarthezTokenizer, BigBirdTokenizer, MBart50Tokenizer, MLukeTokenizer, PegasusTokenizer, RemBertTokenizer,
// XGLMTokenizer. Each function mirrors the class's __init__ in Transformers 5. LayoutXLMTokenizer is not
// here: its __call__ takes words and boxes, not text.
#include <algorithm>

#include "tfm/tokenizer/classes/classes.h"

namespace tfm::tokenizer::classes {
namespace {

// Transformers' FAIRSEQ_LANGUAGE_CODES of mBART-50, in its order.
constexpr std::string_view kMBart50Languages[] = {
    "ar_AR", "cs_CZ", "de_DE", "en_XX", "es_XX", "et_EE", "fi_FI", "fr_XX", "gu_IN", "hi_IN", "it_IT",
    "ja_XX", "kk_KZ", "ko_KR", "lt_LT", "lv_LV", "my_MM", "ne_NP", "nl_XX", "ro_RO", "ru_RU", "si_LK",
    "tr_TR", "vi_VN", "zh_CN", "af_ZA", "az_AZ", "bn_IN", "fa_IR", "he_IL", "hr_HR", "id_ID", "ka_GE",
    "km_KH", "mk_MK", "ml_IN", "mn_MN", "mr_IN", "pl_PL", "ps_AF", "pt_XX", "sv_SE", "sw_KE", "ta_IN",
    "te_IN", "th_TH", "tl_XX", "uk_UA", "ur_PK", "xh_ZA", "gl_ES", "sl_SI"};

// The normalizer Sequence of `items`, and the Metaspace pre-tokenizer and decoder.
void set_pipeline(TokenizerJson& tj, json::Array items, std::string_view prepend_scheme) {
  json::Value normalizer = json::parse(R"({"type": "Sequence"})");
  normalizer.set("normalizers", std::move(items));
  tj.tree.set("normalizer", std::move(normalizer));
  tj.tree.set("pre_tokenizer", metaspace(prepend_scheme));
  tj.tree.set("decoder", metaspace(prepend_scheme));
}

// The Replace of runs of two spaces or more, with ' ' or '▁'.
json::Value collapse_spaces(std::string_view content) {
  json::Value replace = json::parse(R"({"type": "Replace", "pattern": {"Regex": " {2,}"}})");
  replace.set("content", std::string(content));
  return replace;
}

// Whitespace runs and line breaks to one space, NFC, trailing spaces stripped (DeBERTa-v2, BARThez).
void append_whitespace_cleanup(json::Array& items) {
  items.push_back(
      json::parse(R"({"type": "Replace", "pattern": {"Regex": "\\s{2,}|[\\n\\r\\t]"}, "content": " "})"));
  items.push_back(json::parse(R"({"type": "NFC"})"));
  items.push_back(json::parse(R"({"type": "Strip", "strip_left": false, "strip_right": true})"));
}

// "cls $A sep", with the ids the tokenizer has.
json::Value cls_sep_template(const Tokenizer& t) {
  return special_template(t, {t.special_tokens().cls, "$A", t.special_tokens().sep});
}

void rebuild_deberta_v2(TokenizerJson& tj, const json::Value& config) {
  const std::string unk = special_token_or(config, "unk_token", "[UNK]");
  rebuild_unigram(tj, unigram_index(tj, unk).value_or(int_or(config, "unk_id", 1)));
  json::Array normalizers;
  if (bool_or(config, "do_lower_case", false)) normalizers.push_back(json::parse(R"({"type": "Lowercase"})"));
  append_whitespace_cleanup(normalizers);
  const std::string scheme = prefix_scheme(config, "first");
  set_pipeline(tj, std::move(normalizers), scheme);
  json::Array pre_tokenizers;
  if (bool_or(config, "split_by_punct", false))
    pre_tokenizers.push_back(json::parse(R"({"type": "Punctuation", "behavior": "Isolated"})"));
  pre_tokenizers.push_back(metaspace(scheme));
  json::Value pre_tokenizer = json::parse(R"({"type": "Sequence"})");
  pre_tokenizer.set("pretokenizers", std::move(pre_tokenizers));
  tj.tree.set("pre_tokenizer", std::move(pre_tokenizer));
}

void rebuild_barthez(TokenizerJson& tj, const json::Value& config) {
  rebuild_unigram(tj, 3);
  json::Array normalizers;
  append_whitespace_cleanup(normalizers);
  set_pipeline(tj, std::move(normalizers), prefix_scheme(config, "never"));
}

void rebuild_big_bird(TokenizerJson& tj, const json::Value& config) {
  rebuild_unigram(tj, unigram_index(tj, special_token_or(config, "unk_token", "<unk>")).value_or(100));
  set_pipeline(tj,
               {json::parse(R"({"type": "Strip", "strip_left": false, "strip_right": false})"),
                collapse_spaces("\u2581")},
               prefix_scheme(config, "never"));
}

void rebuild_mbart50(TokenizerJson& tj, const json::Value&) {
  // Without any language code in the vocabulary the class builds another one (its special tokens, vocab[3:],
  // the codes): a vocabulary of its own that tokenizer.json does not hold.
  bool has_language_codes = false;
  for_each_unigram_entry(tj, [&](size_t, std::string_view piece, double) {
    has_language_codes = std::find(std::begin(kMBart50Languages), std::end(kMBart50Languages), piece) !=
                         std::end(kMBart50Languages);
    return !has_language_codes;
  });
  check(
      has_language_codes,
      "MBart50Tokenizer: the vocabulary has no language codes (Transformers would rebuild it; tfm does not)");
  json::Array normalizers;
  if (json::Value charsmap = precompiled_normalizer(tj); !charsmap.is_null())
    normalizers.push_back(std::move(charsmap));
  normalizers.push_back(collapse_spaces(" "));
  rebuild_unigram(tj, 3);
  set_pipeline(tj, std::move(normalizers), "always");
}

void mbart50_special_tokens(SpecialTokens& s, const json::Value&) {
  for (std::string_view code : kMBart50Languages) append_missing(s.extra, std::string(code));
}

// set_src_lang_special_tokens: "src_lang $A eos".
std::optional<json::Value> mbart50_post_processor(const Tokenizer& t, const json::Value& config,
                                                  const json::Value&) {
  const std::string src_lang = string_or(config, "src_lang", "en_XX");
  check(std::find(std::begin(kMBart50Languages), std::end(kMBart50Languages), src_lang) !=
            std::end(kMBart50Languages),
        "MBart50Tokenizer: src_lang '", src_lang, "' is not one of its language codes");
  return special_template(t, {src_lang, "$A", t.eos_token()});
}

void rebuild_mluke(TokenizerJson& tj, const json::Value&) {
  rebuild_unigram(tj, 0);
  json::Array normalizers;
  append_quote_replaces(normalizers);
  set_pipeline(tj, std::move(normalizers), "always");
}

// The entity tokens' extras, and their defaults too where missing (the model-specific entity tokens are the
// class's own: own_tokens below).
void mluke_special_tokens(SpecialTokens& s, const json::Value& config) {
  append_luke_entity_extras(s, config);
  for (const auto& [key, fallback] : kLukeEntityTokens) append_missing(s.extra, std::string(fallback));
}

// _post_init: "cls $A sep".
std::optional<json::Value> cls_sep_post_processor(const Tokenizer& t, const json::Value&,
                                                  const json::Value&) {
  return cls_sep_template(t);
}

void rebuild_pegasus(TokenizerJson& tj, const json::Value& config) {
  const std::string unk = special_token_or(config, "unk_token", "<unk>");
  const std::optional<int64_t> unk_id = unigram_index(tj, unk, 0.0, 1);
  check(unk_id.has_value(), "PegasusTokenizer: (\"", unk,
        "\", 0.0) is not in the vocabulary after its first entry");
  json::Array normalizers;
  if (json::Value charsmap = precompiled_normalizer(tj); !charsmap.is_null())
    normalizers.push_back(std::move(charsmap));
  else
    normalizers.push_back(json::parse(R"({"type": "Replace", "pattern": {"Regex": "\\n"}, "content": " "})"));
  normalizers.push_back(collapse_spaces(" "));
  rebuild_unigram(tj, *unk_id);
  set_pipeline(tj, std::move(normalizers), "always");
}

// The additional special tokens the class passes: the default mask_token_sent (the config's was taken aside
// as a model-specific token: own_tokens below) unless that is null, and <unk_2> .. <unk_{offset-1}>.
std::vector<std::string> pegasus_extra_tokens(const json::Value& config) {
  std::vector<std::string> tokens;
  if (const json::Value* sent = config.find("mask_token_sent"); !sent || !sent->is_null())
    tokens.push_back("<mask_1>");
  for (int64_t i = 2; i < int_or(config, "offset", 103); ++i)
    tokens.push_back("<unk_" + std::to_string(i) + ">");
  return tokens;
}

// "$A eos".
std::optional<json::Value> pegasus_post_processor(const Tokenizer& t, const json::Value&,
                                                  const json::Value&) {
  return special_template(t, {"$A", t.eos_token()});
}

void rebuild_rembert(TokenizerJson& tj, const json::Value& config) {
  const json::Value charsmap = precompiled_normalizer(tj);
  rebuild_unigram(tj, 2);
  json::Array normalizers;
  append_quote_replaces(normalizers);
  normalizers.push_back(collapse_spaces(" "));
  if (!bool_or(config, "keep_accents", true)) {
    normalizers.push_back(json::parse(R"({"type": "NFKD"})"));
    normalizers.push_back(json::parse(R"({"type": "StripAccents"})"));
  }
  if (bool_or(config, "do_lower_case", false)) normalizers.push_back(json::parse(R"({"type": "Lowercase"})"));
  if (!charsmap.is_null()) normalizers.push_back(charsmap);
  set_pipeline(tj, std::move(normalizers), prefix_scheme(config, "never"));
}

// "cls $A sep", unless the file has no post-processor: then _post_init's update_post_processor replaces it
// with one that adds nothing (add_bos_token / add_eos_token are dropped when tokenizer.json exists).
std::optional<json::Value> rembert_post_processor(const Tokenizer& t, const json::Value&,
                                                  const json::Value& from_file) {
  return from_file.is_null() ? bos_eos_template(t, false, false) : cls_sep_template(t);
}

void rebuild_xglm(TokenizerJson& tj, const json::Value& config) {
  json::Array normalizers;
  if (json::Value charsmap = precompiled_normalizer(tj); !charsmap.is_null())
    normalizers.push_back(std::move(charsmap));
  normalizers.push_back(collapse_spaces(" "));
  rebuild_unigram(tj, 3);
  set_pipeline(tj, std::move(normalizers), prefix_scheme(config, "never"));
}

// "eos $A".
std::optional<json::Value> xglm_post_processor(const Tokenizer& t, const json::Value&, const json::Value&) {
  return special_template(t, {t.eos_token(), "$A"});
}

}  // namespace

void add_unigram_b_classes(std::vector<TokenizerClass>& out) {
  const TokenizerClass group[] = {
      {"DebertaV2Tokenizer",
       {"[CLS]", "[SEP]", "[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]", {}},
       rebuild_deberta_v2,
       false,
       cls_sep_post_processor},
      {"BarthezTokenizer", {"<s>", "</s>", "<unk>", "</s>", "<pad>", "<s>", "<mask>", {}}, rebuild_barthez},
      {"BigBirdTokenizer",
       {"<s>", "</s>", "<unk>", "[SEP]", "<pad>", "[CLS]", "[MASK]", {}},
       rebuild_big_bird,
       false,
       cls_sep_post_processor},
      {.name = "MBart50Tokenizer",
       .defaults = {{}, "</s>", "<unk>", "</s>", "<pad>", "<s>", "<mask>", {}},
       .rebuild = rebuild_mbart50,
       .post_processor = mbart50_post_processor,
       .special_tokens = mbart50_special_tokens},
      {.name = "MLukeTokenizer",
       .defaults = {"<s>", "</s>", "<unk>", "</s>", "<pad>", "<s>", "<mask>", {}},
       .rebuild = rebuild_mluke,
       .post_processor = cls_sep_post_processor,
       .special_tokens = mluke_special_tokens,
       .own_tokens = {std::begin(kLukeEntityTokens), std::end(kLukeEntityTokens)}},
      {.name = "PegasusTokenizer",
       .defaults = {{}, "</s>", "<unk>", {}, "<pad>", {}, "<mask_2>", {}},
       .rebuild = rebuild_pegasus,
       .post_processor = pegasus_post_processor,
       .extra_special_tokens = pegasus_extra_tokens,
       .own_tokens = {{"mask_token_sent", "<mask_1>"}}},
      {"RemBertTokenizer",
       {"[CLS]", "[SEP]", "<unk>", "[SEP]", "<pad>", "[CLS]", "[MASK]", {}},
       rebuild_rembert,
       false,
       rembert_post_processor},
      {.name = "XGLMTokenizer",  // the <madeupword0..6> it passes as additional special tokens
       .defaults = {"<s>",
                    "</s>",
                    "<unk>",
                    "</s>",
                    "<pad>",
                    "<s>",
                    {},
                    {"<madeupword0>", "<madeupword1>", "<madeupword2>", "<madeupword3>", "<madeupword4>",
                     "<madeupword5>", "<madeupword6>"}},
       .rebuild = rebuild_xglm,
       .post_processor = xglm_post_processor},
  };
  out.insert(out.end(), std::begin(group), std::end(group));
}

}  // namespace tfm::tokenizer::classes

// BPE tokenizer classes of encoder and encoder-decoder models: the byte-level RobertaTokenizer,
// DebertaTokenizer, LukeTokenizer, LayoutLMv3Tokenizer, BlenderbotTokenizer, WhisperTokenizer, CLIPTokenizer
// and the SentencePiece-style NllbTokenizer, ReformerTokenizer, SeamlessM4TTokenizer. Each function mirrors
// the class's __init__ (and the post-processor, special tokens or decode it sets up) in Transformers 5.
#include <algorithm>
#include <iterator>

#include "tfm/tokenizer/classes/classes.h"
#include "tfm/tokenizer/decoders/decoder.h"
#include "tfm/tokenizer/regex.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer::classes {
namespace {

// A token of a class's template with the id Transformers gives it (convert_tokens_to_ids: the unk token's
// for a token the vocabulary lacks).
TokenId with_id(const Tokenizer& t, const std::optional<std::string>& token) {
  check(token.has_value(), "the class's template names a special token the tokenizer does not have");
  const std::optional<int64_t> id = t.convert_tokens_to_ids({*token})[0];
  check(id.has_value(), "the class's template names '", *token, "', which has no id");
  return {*token, *id};
}

// An id of a class's template with its token (convert_ids_to_tokens).
TokenId with_token(const Tokenizer& t, int64_t id) {
  const std::optional<std::string> token = t.id_to_token(id);
  check(token.has_value(), "the class's template names id ", id, ", which has no token");
  return {*token, id};
}

// --- Byte-level classes ---

void rebuild_roberta(TokenizerJson& tj, const json::Value& config) {
  rebuild_byte_level_bpe(tj, bool_or(config, "add_prefix_space", false));
}

// LayoutLMv3 and Blenderbot put a space before the text unless told not to.
void rebuild_prefix_space(TokenizerJson& tj, const json::Value& config) {
  rebuild_byte_level_bpe(tj, bool_or(config, "add_prefix_space", true));
}

std::optional<json::Value> roberta_post_processor(const Tokenizer& t, const json::Value& config,
                                                  const json::Value&) {
  const SpecialTokens& s = t.special_tokens();
  return roberta_processing(with_id(t, s.sep), with_id(t, s.cls), bool_or(config, "trim_offsets", true),
                            bool_or(config, "add_prefix_space", false));
}

std::optional<json::Value> layoutlmv3_post_processor(const Tokenizer& t, const json::Value& config,
                                                     const json::Value&) {
  const SpecialTokens& s = t.special_tokens();
  return roberta_processing(with_id(t, s.sep), with_id(t, s.cls), true,
                            bool_or(config, "add_prefix_space", true));
}

std::optional<json::Value> deberta_post_processor(const Tokenizer& t, const json::Value&,
                                                  const json::Value&) {
  const SpecialTokens& s = t.special_tokens();
  return template_around({with_id(t, s.cls)}, {with_id(t, s.sep)});
}

// LUKE cleans up tokenization spaces itself, BPE or not, and by default.
std::string luke_decode(const Tokenizer& t, const std::vector<int64_t>& ids, bool,
                        const std::function<std::string(const std::vector<int64_t>&)>& backend) {
  std::string text = backend(ids);
  const json::Value* clean_up = t.config().find("clean_up_tokenization_spaces");
  if (!clean_up || (!clean_up->is_null() && clean_up->as_bool()))
    text = clean_up_tokenization(std::move(text), /*do_not_rule=*/false);
  return text;
}

// Whisper's language codes in the order of their tokens after <|startoftranscript|>, with their names.
const std::pair<std::string_view, std::string_view> kWhisperLanguages[] = {
    {"en", "english"},        {"zh", "chinese"},     {"de", "german"},        {"es", "spanish"},
    {"ru", "russian"},        {"ko", "korean"},      {"fr", "french"},        {"ja", "japanese"},
    {"pt", "portuguese"},     {"tr", "turkish"},     {"pl", "polish"},        {"ca", "catalan"},
    {"nl", "dutch"},          {"ar", "arabic"},      {"sv", "swedish"},       {"it", "italian"},
    {"id", "indonesian"},     {"hi", "hindi"},       {"fi", "finnish"},       {"vi", "vietnamese"},
    {"he", "hebrew"},         {"uk", "ukrainian"},   {"el", "greek"},         {"ms", "malay"},
    {"cs", "czech"},          {"ro", "romanian"},    {"da", "danish"},        {"hu", "hungarian"},
    {"ta", "tamil"},          {"no", "norwegian"},   {"th", "thai"},          {"ur", "urdu"},
    {"hr", "croatian"},       {"bg", "bulgarian"},   {"lt", "lithuanian"},    {"la", "latin"},
    {"mi", "maori"},          {"ml", "malayalam"},   {"cy", "welsh"},         {"sk", "slovak"},
    {"te", "telugu"},         {"fa", "persian"},     {"lv", "latvian"},       {"bn", "bengali"},
    {"sr", "serbian"},        {"az", "azerbaijani"}, {"sl", "slovenian"},     {"kn", "kannada"},
    {"et", "estonian"},       {"mk", "macedonian"},  {"br", "breton"},        {"eu", "basque"},
    {"is", "icelandic"},      {"hy", "armenian"},    {"ne", "nepali"},        {"mn", "mongolian"},
    {"bs", "bosnian"},        {"kk", "kazakh"},      {"sq", "albanian"},      {"sw", "swahili"},
    {"gl", "galician"},       {"mr", "marathi"},     {"pa", "punjabi"},       {"si", "sinhala"},
    {"km", "khmer"},          {"sn", "shona"},       {"yo", "yoruba"},        {"so", "somali"},
    {"af", "afrikaans"},      {"oc", "occitan"},     {"ka", "georgian"},      {"be", "belarusian"},
    {"tg", "tajik"},          {"sd", "sindhi"},      {"gu", "gujarati"},      {"am", "amharic"},
    {"yi", "yiddish"},        {"lo", "lao"},         {"uz", "uzbek"},         {"fo", "faroese"},
    {"ht", "haitian creole"}, {"ps", "pashto"},      {"tk", "turkmen"},       {"nn", "nynorsk"},
    {"mt", "maltese"},        {"sa", "sanskrit"},    {"lb", "luxembourgish"}, {"my", "myanmar"},
    {"bo", "tibetan"},        {"tl", "tagalog"},     {"mg", "malagasy"},      {"as", "assamese"},
    {"tt", "tatar"},          {"haw", "hawaiian"},   {"ln", "lingala"},       {"ha", "hausa"},
    {"ba", "bashkir"},        {"jw", "javanese"},    {"su", "sundanese"},     {"yue", "cantonese"}};
// Other names Whisper takes for a language.
const std::pair<std::string_view, std::string_view> kWhisperLanguageAliases[] = {
    {"my", "burmese"},       {"ca", "valencian"}, {"nl", "flemish"},   {"ht", "haitian"},
    {"lb", "letzeburgesch"}, {"ps", "pushto"},    {"pa", "panjabi"},   {"ro", "moldavian"},
    {"ro", "moldovan"},      {"si", "sinhalese"}, {"es", "castilian"}, {"zh", "mandarin"}};

// The place of a language (a name or a code, any case) among Whisper's language tokens.
int64_t whisper_language_index(const std::string& language) {
  const std::string lower = to_lowercase(language);
  std::string_view code = lower;
  for (const auto& [c, name] : kWhisperLanguageAliases)
    if (name == lower) code = c;
  for (const auto& [c, name] : kWhisperLanguages)
    if (name == lower) code = c;
  for (size_t i = 0; i < std::size(kWhisperLanguages); ++i)
    if (kWhisperLanguages[i].first == code) return static_cast<int64_t>(i);
  throw_error("WhisperTokenizer: unsupported language '", language, "'");
}

void rebuild_whisper(TokenizerJson& tj, const json::Value& config) {
  rebuild_byte_level_bpe(tj, bool_or(config, "add_prefix_space", false));
}

// set_prefix_tokens: <|startoftranscript|>, the language, the task, <|notimestamps|> unless timestamps are
// predicted; then the text and eos.
std::optional<json::Value> whisper_post_processor(const Tokenizer& t, const json::Value& config,
                                                  const json::Value&) {
  const int64_t start = with_id(t, "<|startoftranscript|>").second;
  std::vector<TokenId> prefix{with_token(t, start)};
  if (const json::Value* language = config.find("language"); language && !language->is_null())
    prefix.push_back(with_token(t, start + 1 + whisper_language_index(language->as_string())));
  if (const json::Value* task = config.find("task"); task && !task->is_null()) {
    const std::string& name = task->as_string();
    check(name == "translate" || name == "transcribe", "WhisperTokenizer: unsupported task '", name, "'");
    prefix.push_back(with_token(t, with_id(t, "<|" + name + "|>").second));
  }
  if (!bool_or(config, "predict_timestamps", false))
    prefix.push_back(with_token(t, with_id(t, "<|notimestamps|>").second));
  return template_around(prefix, {with_id(t, t.eos_token())});
}

// Whisper's decode: with skip_special_tokens, a prompt (<|startofprev|> ...) goes up to
// <|startoftranscript|>; timestamps such as <|1.08|> never show.
std::string whisper_decode(const Tokenizer& t, const std::vector<int64_t>& ids, bool skip_special_tokens,
                           const std::function<std::string(const std::vector<int64_t>&)>& backend) {
  std::vector<int64_t> kept = ids;
  if (skip_special_tokens && !kept.empty()) {
    const auto prompt_and_start = t.convert_tokens_to_ids({"<|startofprev|>", "<|startoftranscript|>"});
    if (prompt_and_start[0] && kept[0] == *prompt_and_start[0]) {
      auto start =
          prompt_and_start[1] ? std::find(kept.begin(), kept.end(), *prompt_and_start[1]) : kept.end();
      kept.erase(kept.begin(), start);
    }
  }
  // Python's \d: any decimal digit.
  static const Pattern kTimestamp =
      Pattern::from_json(json::parse(R"({"Regex": "<\\|\\p{Nd}+\\.\\p{Nd}+\\|>"})"));
  return kTimestamp.replace_all(backend(kept), "");
}

void rebuild_clip(TokenizerJson& tj, const json::Value& config) {
  json::Value options =
      json::parse(R"({"continuing_subword_prefix": "", "end_of_word_suffix": "</w>", "fuse_unk": false})");
  options.set("unk_token", special_token_or(config, "unk_token", "<|endoftext|>"));
  rebuild_model(tj, "BPE", json::dump(options));
  tj.tree.set("normalizer", json::parse(R"({"type": "Sequence", "normalizers": [{"type": "NFC"},
      {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, {"type": "Lowercase"}]})"));
  tj.tree.set("pre_tokenizer", json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex":
       "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+"},
       "behavior": "Removed", "invert": true},
      {"type": "ByteLevel", "add_prefix_space": false}]})"));
  tj.tree.set("decoder", json::parse(R"({"type": "ByteLevel"})"));
}

std::optional<json::Value> clip_post_processor(const Tokenizer& t, const json::Value&, const json::Value&) {
  return roberta_processing(with_id(t, t.eos_token()), with_id(t, t.bos_token()), false, false);
}

// Python's str.isspace: Unicode White_Space and the four information separators.
bool is_python_space(char32_t c) {
  return is_whitespace(c) || (c >= 0x1C && c <= 0x1F);
}

// CLIP wraps the library's decode: each end-of-word suffix becomes a space, and the text is stripped.
std::string clip_decode(const Tokenizer&, const std::vector<int64_t>& ids, bool,
                        const std::function<std::string(const std::vector<int64_t>&)>& backend) {
  const std::string text = replace_all(backend(ids), "</w>", " ");
  const auto [start, end] = trimmed_range(text, true, true, is_python_space);
  return text.substr(start, end - start);
}

// --- SentencePiece-style classes ---

// The SentencePiece BPE of NLLB, Reformer and SeamlessM4T: unk fused, no byte fallback, Metaspace.
void rebuild_spm_bpe(TokenizerJson& tj, const json::Value& config, std::string_view prepend_scheme) {
  json::Value options = json::parse(R"({"fuse_unk": true, "byte_fallback": false})");
  options.set("unk_token", special_token_or(config, "unk_token", "<unk>"));
  rebuild_model(tj, "BPE", json::dump(options));
  tj.tree.set("pre_tokenizer", metaspace(prepend_scheme));
  tj.tree.set("decoder", metaspace(prepend_scheme));
}

// NLLB and Reformer: the file's charsmap (if any) then runs of spaces made one; ▁ always in front.
void rebuild_nllb(TokenizerJson& tj, const json::Value& config) {
  const json::Value precompiled = precompiled_normalizer(tj);
  rebuild_spm_bpe(tj, config, "always");
  if (!precompiled.is_null()) {
    json::Value normalizer = json::parse(R"({"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]})");
    auto& parts = normalizer.find("normalizers")->as_array();
    parts.insert(parts.begin(), precompiled);
    tj.tree.set("normalizer", std::move(normalizer));
  }
}

const char* const kNllbLanguageCodes[] = {
    "ace_Arab", "ace_Latn", "acm_Arab", "acq_Arab", "aeb_Arab", "afr_Latn", "ajp_Arab", "aka_Latn",
    "amh_Ethi", "apc_Arab", "arb_Arab", "ars_Arab", "ary_Arab", "arz_Arab", "asm_Beng", "ast_Latn",
    "awa_Deva", "ayr_Latn", "azb_Arab", "azj_Latn", "bak_Cyrl", "bam_Latn", "ban_Latn", "bel_Cyrl",
    "bem_Latn", "ben_Beng", "bho_Deva", "bjn_Arab", "bjn_Latn", "bod_Tibt", "bos_Latn", "bug_Latn",
    "bul_Cyrl", "cat_Latn", "ceb_Latn", "ces_Latn", "cjk_Latn", "ckb_Arab", "crh_Latn", "cym_Latn",
    "dan_Latn", "deu_Latn", "dik_Latn", "dyu_Latn", "dzo_Tibt", "ell_Grek", "eng_Latn", "epo_Latn",
    "est_Latn", "eus_Latn", "ewe_Latn", "fao_Latn", "pes_Arab", "fij_Latn", "fin_Latn", "fon_Latn",
    "fra_Latn", "fur_Latn", "fuv_Latn", "gla_Latn", "gle_Latn", "glg_Latn", "grn_Latn", "guj_Gujr",
    "hat_Latn", "hau_Latn", "heb_Hebr", "hin_Deva", "hne_Deva", "hrv_Latn", "hun_Latn", "hye_Armn",
    "ibo_Latn", "ilo_Latn", "ind_Latn", "isl_Latn", "ita_Latn", "jav_Latn", "jpn_Jpan", "kab_Latn",
    "kac_Latn", "kam_Latn", "kan_Knda", "kas_Arab", "kas_Deva", "kat_Geor", "knc_Arab", "knc_Latn",
    "kaz_Cyrl", "kbp_Latn", "kea_Latn", "khm_Khmr", "kik_Latn", "kin_Latn", "kir_Cyrl", "kmb_Latn",
    "kon_Latn", "kor_Hang", "kmr_Latn", "lao_Laoo", "lvs_Latn", "lij_Latn", "lim_Latn", "lin_Latn",
    "lit_Latn", "lmo_Latn", "ltg_Latn", "ltz_Latn", "lua_Latn", "lug_Latn", "luo_Latn", "lus_Latn",
    "mag_Deva", "mai_Deva", "mal_Mlym", "mar_Deva", "min_Latn", "mkd_Cyrl", "plt_Latn", "mlt_Latn",
    "mni_Beng", "khk_Cyrl", "mos_Latn", "mri_Latn", "zsm_Latn", "mya_Mymr", "nld_Latn", "nno_Latn",
    "nob_Latn", "npi_Deva", "nso_Latn", "nus_Latn", "nya_Latn", "oci_Latn", "gaz_Latn", "ory_Orya",
    "pag_Latn", "pan_Guru", "pap_Latn", "pol_Latn", "por_Latn", "prs_Arab", "pbt_Arab", "quy_Latn",
    "ron_Latn", "run_Latn", "rus_Cyrl", "sag_Latn", "san_Deva", "sat_Beng", "scn_Latn", "shn_Mymr",
    "sin_Sinh", "slk_Latn", "slv_Latn", "smo_Latn", "sna_Latn", "snd_Arab", "som_Latn", "sot_Latn",
    "spa_Latn", "als_Latn", "srd_Latn", "srp_Cyrl", "ssw_Latn", "sun_Latn", "swe_Latn", "swh_Latn",
    "szl_Latn", "tam_Taml", "tat_Cyrl", "tel_Telu", "tgk_Cyrl", "tgl_Latn", "tha_Thai", "tir_Ethi",
    "taq_Latn", "taq_Tfng", "tpi_Latn", "tsn_Latn", "tso_Latn", "tuk_Latn", "tum_Latn", "tur_Latn",
    "twi_Latn", "tzm_Tfng", "uig_Arab", "ukr_Cyrl", "umb_Latn", "urd_Arab", "uzn_Latn", "vec_Latn",
    "vie_Latn", "war_Latn", "wol_Latn", "xho_Latn", "ydd_Hebr", "yor_Latn", "yue_Hant", "zho_Hans",
    "zho_Hant", "zul_Latn"};

// NLLB's language codes are its extra special tokens unless the config lists some.
void nllb_special_tokens(SpecialTokens& s, const json::Value& config) {
  const json::Value* extra = config.find("extra_special_tokens");
  if (!extra || !extra->is_array())
    s.extra.assign(std::begin(kNllbLanguageCodes), std::end(kNllbLanguageCodes));
}

// set_src_lang_special_tokens: the source language's code then the text then eos, or with
// legacy_behaviour the text, eos, the code.
std::optional<json::Value> nllb_post_processor(const Tokenizer& t, const json::Value& config,
                                               const json::Value&) {
  const TokenId language = with_id(t, string_or(config, "src_lang", "eng_Latn"));
  const TokenId eos = with_id(t, t.eos_token());
  if (bool_or(config, "legacy_behaviour", false)) return template_around({}, {eos, language});
  return template_around({language}, {eos});
}

void rebuild_seamless_m4t(TokenizerJson& tj, const json::Value& config) {
  rebuild_spm_bpe(tj, config, "first");
  tj.tree.set("normalizer", json::parse(R"({"type": "Sequence", "normalizers": [
      {"type": "Replace", "pattern": {"Regex": "[\\n\\r\\t]"}, "content": " "}, {"type": "NFKC"},
      {"type": "Strip", "strip_left": false, "strip_right": true},
      {"type": "Replace", "pattern": {"Regex": " +\u2581"}, "content": "\u2581"},
      {"type": "Replace", "pattern": {"Regex": "^\u2581+$"}, "content": ""},
      {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"}]})"));
}

// Encoding text switches SeamlessM4T to its source language: that language's code, the text, eos.
std::optional<json::Value> seamless_m4t_post_processor(const Tokenizer& t, const json::Value& config,
                                                       const json::Value&) {
  std::string language = string_or(config, "src_lang", "eng");
  if (language.find("__") == std::string::npos) language = "__" + language + "__";
  return template_around({with_token(t, with_id(t, language).second)},
                         {with_token(t, with_id(t, t.eos_token()).second)});
}

}  // namespace

void add_encoder_bpe_classes(std::vector<TokenizerClass>& out) {
  const SpecialTokens roberta{"<s>", "</s>", "<unk>", "</s>", "<pad>", "<s>", "<mask>", {}};
  const TokenizerClass group[] = {
      {.name = "RobertaTokenizer",
       .defaults = roberta,
       .rebuild = rebuild_roberta,
       .post_processor = roberta_post_processor},
      {.name = "DebertaTokenizer",
       .defaults = {"[CLS]", "[SEP]", "[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]", {}},
       .rebuild = rebuild_roberta,
       .post_processor = deberta_post_processor},
      {.name = "LukeTokenizer",
       .defaults = roberta,
       .rebuild = rebuild_roberta,
       .special_tokens = append_luke_entity_extras,
       .own_tokens = {std::begin(kLukeEntityTokens), std::end(kLukeEntityTokens)},
       .decode = luke_decode},
      {.name = "LayoutLMv3Tokenizer",
       .defaults = roberta,
       .rebuild = rebuild_prefix_space,
       .post_processor = layoutlmv3_post_processor},
      {.name = "BlenderbotTokenizer", .defaults = roberta, .rebuild = rebuild_prefix_space},
      {.name = "WhisperTokenizer",
       .defaults = {"<|endoftext|>", "<|endoftext|>", "<|endoftext|>", {}, {}, {}, {}, {}},
       .rebuild = rebuild_whisper,
       .post_processor = whisper_post_processor,
       .decode = whisper_decode},
      {.name = "CLIPTokenizer",
       .defaults = {"<|startoftext|>", "<|endoftext|>", "<|endoftext|>", {}, "<|endoftext|>", {}, {}, {}},
       .rebuild = rebuild_clip,
       .post_processor = clip_post_processor,
       .decode = clip_decode},
      {.name = "NllbTokenizer",
       .defaults = {"<s>", "</s>", "<unk>", "</s>", "<pad>", "<s>", "<mask>", {}},
       .rebuild = rebuild_nllb,
       .post_processor = nllb_post_processor,
       .special_tokens = nllb_special_tokens},
      {.name = "ReformerTokenizer",
       .defaults = {{}, "</s>", "<unk>", {}, {}, {}, {}, {}},
       .rebuild = rebuild_nllb},
      {.name = "SeamlessM4TTokenizer",
       .defaults = {"<s>", "</s>", "<unk>", "</s>", "<pad>", "<s>", {}, {}},
       .rebuild = rebuild_seamless_m4t,
       .post_processor = seamless_m4t_post_processor},
  };
  out.insert(out.end(), std::begin(group), std::end(group));
}

}  // namespace tfm::tokenizer::classes

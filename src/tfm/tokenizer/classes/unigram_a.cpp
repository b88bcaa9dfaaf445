// SentencePiece Unigram classes: T5Tokenizer, LasrTokenizer, VideoPrismTokenizer, UdopTokenizer,
// AlbertTokenizer, XLNetTokenizer, CamembertTokenizer, XLMRobertaTokenizer, MBartTokenizer. Each function
// mirrors the class's __init__ in Transformers 5. Their unk_id is the class's own choice, often a fixed index
// whatever the vocabulary holds there.
#include "tfm/tokenizer/classes/classes.h"

namespace tfm::tokenizer::classes {
namespace {

// ALBERT's and XLNet's normalizer: `` and '' as ", then NFKD without accents, lowercase, the charsmap.
json::Value quotes_normalizer(bool strip_accents, bool lowercase, json::Value charsmap) {
  json::Value sequence = json::parse(R"({"type": "Sequence", "normalizers": []})");
  json::Array& list = sequence.find("normalizers")->as_array();
  append_quote_replaces(list);
  if (strip_accents) {
    list.push_back(json::parse(R"({"type": "NFKD"})"));
    list.push_back(json::parse(R"({"type": "StripAccents"})"));
  }
  if (lowercase) list.push_back(json::parse(R"({"type": "Lowercase"})"));
  if (!charsmap.is_null()) list.push_back(std::move(charsmap));
  return sequence;
}

// T5Tokenizer, LasrTokenizer, VideoPrismTokenizer (UnkId 2, 3, 2): the file's charsmap and always a prefix.
template <int64_t UnkId>
void rebuild_t5(TokenizerJson& tj, const json::Value&) {
  json::Value charsmap = precompiled_normalizer(tj);
  rebuild_unigram(tj, UnkId);
  tj.tree.set("normalizer", std::move(charsmap));
  set_whitespace_metaspace(tj, "always");
}

void rebuild_udop(TokenizerJson& tj, const json::Value& config) {
  rebuild_unigram(tj, unigram_piece_id(tj, special_token_or(config, "unk_token", "<unk>")).value_or(2));
  set_whitespace_metaspace(tj, "always");
}

void rebuild_mbart(TokenizerJson& tj, const json::Value&) {
  rebuild_unigram(tj, 3);
  set_whitespace_metaspace(tj, "always");
}

void rebuild_albert(TokenizerJson& tj, const json::Value& config) {
  json::Value charsmap = precompiled_normalizer(tj);
  rebuild_unigram(tj, 1);
  tj.tree.set("normalizer", quotes_normalizer(!bool_or(config, "keep_accents", false),
                                              bool_or(config, "do_lower_case", true), std::move(charsmap)));
  set_whitespace_metaspace(tj, prefix_scheme(config));
}

// keep_accents is stored but not read: accents always go. The prefix is always added too (legacy is unset
// when __init__ asks for it).
void rebuild_xlnet(TokenizerJson& tj, const json::Value& config) {
  json::Value charsmap = precompiled_normalizer(tj);
  rebuild_unigram(tj, int_or(config, "unk_id", 0));
  tj.tree.set("normalizer",
              quotes_normalizer(true, bool_or(config, "do_lower_case", false), std::move(charsmap)));
  set_whitespace_metaspace(tj, "always");
}

void rebuild_camembert(TokenizerJson& tj, const json::Value& config) {
  json::Value charsmap = precompiled_normalizer(tj);
  rebuild_unigram(tj, unigram_piece_id(tj, special_token_or(config, "unk_token", "<unk>")).value_or(0));
  tj.tree.set("normalizer", std::move(charsmap));
  set_whitespace_metaspace(tj, prefix_scheme(config));
}

void rebuild_xlm_roberta(TokenizerJson& tj, const json::Value& config) {
  json::Value charsmap = precompiled_normalizer(tj);
  rebuild_unigram(tj, 3);
  tj.tree.set("normalizer", std::move(charsmap));
  set_whitespace_metaspace(tj, prefix_scheme(config));
}

// A named special token as Python formats it into a template: None where unset.
std::string name(const std::optional<std::string>& token) {
  return token.value_or("None");
}

std::optional<int64_t> id_of(const Tokenizer& t, const std::optional<std::string>& token) {
  return token ? t.convert_tokens_to_ids({*token})[0] : std::nullopt;
}

// T5, Lasr, Udop: "$A </s>" with the eos token's id under the name "</s>", whatever eos_token is.
std::optional<json::Value> eos_template(const Tokenizer& t, const json::Value&, const json::Value&) {
  return template_processing({"$A", "</s>"}, {"$A", "</s>", "$B", "</s>"}, {{"</s>", t.eos_token_id()}});
}

// ALBERT sets its template before the base class takes the file's, so it stays only where the file has none.
// Its ids come from the model's vocabulary; where cls or sep is only an added token Python fails and this
// takes the added token's id.
std::optional<json::Value> albert_template(const Tokenizer& t, const json::Value&,
                                           const json::Value& from_file) {
  if (!from_file.is_null()) return std::nullopt;
  const SpecialTokens& s = t.special_tokens();
  return template_processing({"[CLS]:0", "$A:0", "[SEP]:0"},
                             {"[CLS]:0", "$A:0", "[SEP]:0", "$B:1", "[SEP]:1"},
                             {{"[CLS]", s.cls ? t.token_to_id(*s.cls) : std::nullopt},
                              {"[SEP]", s.sep ? t.token_to_id(*s.sep) : std::nullopt}});
}

std::optional<json::Value> xlnet_template(const Tokenizer& t, const json::Value&, const json::Value&) {
  const SpecialTokens& s = t.special_tokens();
  const std::string sep = name(s.sep), cls = name(s.cls);
  return template_processing({"$A:0", sep + ":0", cls + ":2"},
                             {"$A:0", sep + ":0", "$B:1", sep + ":1", cls + ":2"},
                             {{sep, id_of(t, s.sep)}, {cls, id_of(t, s.cls)}});
}

// CamemBERT and XLM-R: "<s> $A </s>", and "</s> </s>" between a pair.
std::optional<json::Value> roberta_template(const Tokenizer& t, const json::Value&, const json::Value&) {
  const SpecialTokens& s = t.special_tokens();
  const std::string bos = name(s.bos), eos = name(s.eos);
  return template_processing({bos, "$A", eos}, {bos, "$A", eos, eos, "$B", eos},
                             {{bos, t.bos_token_id()}, {eos, t.eos_token_id()}});
}

// MBart ends every sequence with eos and the source language's code (src_lang, en_XX by default), each
// named as its id converts back.
std::optional<json::Value> mbart_template(const Tokenizer& t, const json::Value& config, const json::Value&) {
  const std::optional<int64_t> eos = t.eos_token_id();
  const std::optional<int64_t> lang = t.convert_tokens_to_ids({string_or(config, "src_lang", "en_XX")})[0];
  check(eos && lang, "MBartTokenizer: eos_token or src_lang has no id");
  const std::string eos_name = t.id_to_token(*eos).value_or("None");
  const std::string lang_name = t.id_to_token(*lang).value_or("None");
  return template_processing({"$A", eos_name, lang_name}, {"$A", "$B", eos_name, lang_name},
                             {{eos_name, eos}, {lang_name, lang}});
}

// T5's sentinels <extra_id_0> ... <extra_id_{extra_ids-1}>.
std::vector<std::string> sentinels(const json::Value& config) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < int_or(config, "extra_ids", 100); ++i)
    out.push_back("<extra_id_" + std::to_string(i) + ">");
  return out;
}

constexpr const char* kFairseqLanguageCodes[] = {
    "ar_AR", "cs_CZ", "de_DE", "en_XX", "es_XX", "et_EE", "fi_FI", "fr_XX", "gu_IN",
    "hi_IN", "it_IT", "ja_XX", "kk_KZ", "ko_KR", "lt_LT", "lv_LV", "my_MM", "ne_NP",
    "nl_XX", "ro_RO", "ru_RU", "si_LK", "tr_TR", "vi_VN", "zh_CN"};

// LasrTokenizer decodes CTC output: a run of one id counts once, and pad tokens are left out.
std::string ctc_decode(const Tokenizer& t, const std::vector<int64_t>& ids, bool,
                       const std::function<std::string(const std::vector<int64_t>&)>& backend) {
  const std::optional<int64_t> pad = t.pad_token_id();
  std::vector<int64_t> kept;
  for (size_t i = 0; i < ids.size(); ++i)
    if ((i == 0 || ids[i] != ids[i - 1]) && ids[i] != pad) kept.push_back(ids[i]);
  return backend(kept);
}

}  // namespace

void add_unigram_a_classes(std::vector<TokenizerClass>& out) {
  const SpecialTokens t5_tokens{{}, "</s>", "<unk>", {}, "<pad>", {}, {}, {}};
  const SpecialTokens roberta_tokens{"<s>", "</s>", "<unk>", "</s>", "<pad>", "<s>", "<mask>", {}};
  out.push_back({.name = "T5Tokenizer",
                 .defaults = t5_tokens,
                 .rebuild = rebuild_t5<2>,
                 .post_processor = eos_template,
                 .extra_special_tokens = sentinels});
  out.push_back({.name = "LasrTokenizer",
                 .defaults = t5_tokens,
                 .rebuild = rebuild_t5<3>,
                 .post_processor = eos_template,
                 .extra_special_tokens = sentinels,
                 .decode = ctc_decode});
  // No template of its own: the file's, or update_post_processor's plain one where the file has none.
  out.push_back({.name = "VideoPrismTokenizer",
                 .defaults = t5_tokens,
                 .rebuild = rebuild_t5<2>,
                 .extra_special_tokens = sentinels});
  out.push_back({.name = "UdopTokenizer",
                 .defaults = {{}, "</s>", "<unk>", "</s>", "<pad>", {}, {}, {}},
                 .rebuild = rebuild_udop,
                 .post_processor = eos_template});
  out.push_back({.name = "AlbertTokenizer",
                 .defaults = {"[CLS]", "[SEP]", "<unk>", "[SEP]", "<pad>", "[CLS]", "[MASK]", {}},
                 .rebuild = rebuild_albert,
                 .post_processor = albert_template});
  out.push_back(
      {.name = "XLNetTokenizer",
       .defaults = {"<s>", "</s>", "<unk>", "<sep>", "<pad>", "<cls>", "<mask>", {"<eop>", "<eod>"}},
       .rebuild = rebuild_xlnet,
       .post_processor = xlnet_template});
  SpecialTokens camembert_tokens = roberta_tokens;
  camembert_tokens.extra = {"<s>NOTUSED", "</s>NOTUSED", "<unk>NOTUSED"};
  out.push_back({.name = "CamembertTokenizer",
                 .defaults = camembert_tokens,
                 .rebuild = rebuild_camembert,
                 .post_processor = roberta_template});
  out.push_back({.name = "XLMRobertaTokenizer",
                 .defaults = roberta_tokens,
                 .rebuild = rebuild_xlm_roberta,
                 .post_processor = roberta_template});
  SpecialTokens mbart_tokens = roberta_tokens;
  mbart_tokens.extra.assign(std::begin(kFairseqLanguageCodes), std::end(kFairseqLanguageCodes));
  out.push_back({.name = "MBartTokenizer",
                 .defaults = mbart_tokens,
                 .rebuild = rebuild_mbart,
                 .post_processor = mbart_template});
}

}  // namespace tfm::tokenizer::classes

#include "tfm/tokenizer/classes/classes.h"

#include <algorithm>
#include <charconv>

#include "tfm/io/json_reader.h"

namespace tfm::tokenizer::classes {

void rebuild_model(TokenizerJson& tj, std::string_view type, std::string_view options) {
  json::Value* found = tj.tree.find("model");
  check(found != nullptr, "missing field 'model'");
  check(!tj.vocab.empty(), "model: missing field 'vocab'");
  json::Value model = json::parse(options);
  model.set("type", std::string(type));
  *found = std::move(model);
  if (type == "BPE" && tj.merges.empty()) tj.merges = "[]";
  if (type != "BPE") tj.merges = {};
  tj.python_numbers = true;  // the class gets the vocabulary from json.load
  for (const char* stage : {"normalizer", "pre_tokenizer", "decoder"}) tj.tree.set(stage, nullptr);
}

void rebuild_byte_level_bpe(TokenizerJson& tj, bool add_prefix_space) {
  rebuild_model(tj, "BPE",
                R"({"continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false})");
  json::Value pre = json::parse(R"({"type": "ByteLevel"})");
  pre.set("add_prefix_space", add_prefix_space);
  tj.tree.set("pre_tokenizer", std::move(pre));
  tj.tree.set("decoder", json::parse(R"({"type": "ByteLevel"})"));
}

json::Value precompiled_normalizer(const TokenizerJson& tj) {
  const json::Value* normalizer = tj.tree.find("normalizer");
  if (!normalizer || !normalizer->is_object()) return {};
  const json::Value* found = nullptr;
  auto look = [&](const json::Value& stage) {
    if (!found && stage.is_object() && string_or(stage, "type", "") == "Precompiled" &&
        stage.contains("precompiled_charsmap"))
      found = &stage;
  };
  if (string_or(*normalizer, "type", "") != "Sequence")
    look(*normalizer);
  else if (const json::Value* steps = normalizer->find("normalizers"); steps && steps->is_array())
    for (const json::Value& stage : steps->as_array()) look(stage);
  return found && !string_or(*found, "precompiled_charsmap", "").empty() ? *found : json::Value();
}

namespace {

// A piece of a template as Rust's Piece::try_from reads it: "id" or "id:type_id", where "$", "$A", "$B" and
// "$<type_id>" are the sequences.
json::Value template_piece(const std::string& item) {
  auto number = [&](std::string_view text) {
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    check(ec == std::errc() && end == text.data() + text.size() && n >= 0,
          "cannot build a template piece from '", item, "'");
    return n;
  };
  const size_t colon = item.find(':');
  check(colon == std::string::npos || item.find(':', colon + 1) == std::string::npos,
        "cannot build a template piece from '", item, "'");
  const std::string id = item.substr(0, colon);
  int64_t type_id = colon == std::string::npos ? 0 : number(std::string_view(item).substr(colon + 1));
  json::Value inner = json::Object{};
  json::Value piece = json::Object{};
  if (!id.empty() && id[0] == '$') {
    const std::string rest = id.substr(1);
    const bool b = rest == "B" || rest == "b";
    if (!b && !rest.empty() && rest != "A" && rest != "a") type_id = number(rest);
    inner.set("id", b ? "B" : "A");
    inner.set("type_id", type_id);
    piece.set("Sequence", std::move(inner));
  } else {
    inner.set("id", id);
    inner.set("type_id", type_id);
    piece.set("SpecialToken", std::move(inner));
  }
  return piece;
}

// A special_tokens entry of a TemplateProcessing.
json::Value special_token_entry(const TokenId& token) {
  json::Value entry = json::Object{};
  entry.set("id", token.first);
  entry.set("ids", json::Array{json::Value(token.second)});
  entry.set("tokens", json::Array{json::Value(token.first)});
  return entry;
}

}  // namespace

json::Value template_processing(const std::vector<std::string>& single, const std::vector<std::string>& pair,
                                const std::vector<std::pair<std::string, std::optional<int64_t>>>& special) {
  json::Value special_tokens = json::Object{};
  for (const auto& [token, id] : special) {
    check(id.has_value(), "special token '", token, "' of the class's template has no id");
    special_tokens.set(token, special_token_entry({token, *id}));
  }
  json::Value out = json::Object{};
  out.set("type", "TemplateProcessing");
  for (const auto& [name, spec] : {std::pair{"single", &single}, std::pair{"pair", &pair}}) {
    json::Array pieces;
    for (const std::string& item : *spec) pieces.push_back(template_piece(item));
    out.set(name, std::move(pieces));
  }
  out.set("special_tokens", std::move(special_tokens));
  return out;
}

json::Value template_around(const std::vector<TokenId>& prefix, const std::vector<TokenId>& suffix) {
  json::Array single;
  json::Value special_tokens = json::Object{};
  auto add = [&](const TokenId& token) {
    json::Value piece = json::parse(R"({"SpecialToken": {"type_id": 0}})");
    piece.find("SpecialToken")->set("id", token.first);
    single.push_back(std::move(piece));
    special_tokens.set(token.first, special_token_entry(token));
  };
  for (const TokenId& token : prefix) add(token);
  single.push_back(json::parse(R"({"Sequence": {"id": "A", "type_id": 0}})"));
  for (const TokenId& token : suffix) add(token);
  json::Value out = json::Object{};
  out.set("type", "TemplateProcessing");
  out.set("single", std::move(single));
  out.set("special_tokens", std::move(special_tokens));
  return out;
}

json::Value special_template(const Tokenizer& t, std::initializer_list<std::optional<std::string>> items) {
  std::vector<TokenId> prefix, suffix;
  std::vector<TokenId>* side = &prefix;
  for (const std::optional<std::string>& token : items) {
    if (token == "$A")
      side = &suffix;
    else if (const std::optional<int64_t> id = token ? t.token_to_id(*token) : std::nullopt)
      side->emplace_back(*token, *id);
  }
  return template_around(prefix, suffix);
}

json::Value roberta_processing(const TokenId& sep, const TokenId& cls, bool trim_offsets,
                               bool add_prefix_space) {
  json::Value out = json::parse(R"({"type": "RobertaProcessing"})");
  out.set("sep", json::Array{json::Value(sep.first), json::Value(sep.second)});
  out.set("cls", json::Array{json::Value(cls.first), json::Value(cls.second)});
  out.set("trim_offsets", trim_offsets);
  out.set("add_prefix_space", add_prefix_space);
  return out;
}

json::Value bos_eos_template(const Tokenizer& t, bool add_bos, bool add_eos) {
  return special_template(
      t, {add_bos ? t.bos_token() : std::nullopt, "$A", add_eos ? t.eos_token() : std::nullopt});
}

void rebuild_unigram(TokenizerJson& tj, int64_t unk_id) {
  json::Value options = json::parse(R"({"byte_fallback": false})");
  options.set("unk_id", unk_id);
  rebuild_model(tj, "Unigram", json::dump(options));
}

void for_each_unigram_entry(const TokenizerJson& tj,
                            const std::function<bool(size_t, std::string_view, double)>& visit) {
  check(!tj.vocab.empty(), "model: missing field 'vocab'");
  json::Reader r(tj.vocab, *tj.text);
  r.begin_array();
  for (size_t i = 0; r.next_element(); ++i) {
    auto bad = [&] { throw_error("model: vocab entry ", i, " must be [\"piece\", score]"); };
    r.begin_array();
    if (!r.next_element()) bad();
    const std::string_view piece = r.string();  // valid until the next string()
    if (!r.next_element()) bad();
    const double score = r.number();
    if (r.next_element()) bad();
    if (!visit(i, piece, score)) return;
  }
}

std::optional<int64_t> unigram_index(const TokenizerJson& tj, std::string_view piece, double score,
                                     size_t start) {
  std::optional<int64_t> found;
  for_each_unigram_entry(tj, [&](size_t i, std::string_view p, double s) {
    if (i >= start && p == piece && s == score) found = static_cast<int64_t>(i);
    return !found;
  });
  return found;
}

std::optional<int64_t> unigram_piece_id(const TokenizerJson& tj, std::string_view piece) {
  std::optional<int64_t> found;
  for_each_unigram_entry(tj, [&](size_t i, std::string_view p, double) {
    if (p == piece) found = static_cast<int64_t>(i);
    return !found;
  });
  return found;
}

json::Value metaspace(std::string_view prepend_scheme, bool split) {
  json::Value m = json::parse(R"({"type": "Metaspace", "replacement": "\u2581"})");
  m.set("prepend_scheme", std::string(prepend_scheme));
  m.set("split", split);
  return m;
}

void set_whitespace_metaspace(TokenizerJson& tj, std::string_view prepend_scheme) {
  json::Value pre = json::parse(R"({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}]})");
  pre.find("pretokenizers")->as_array().push_back(metaspace(prepend_scheme));
  tj.tree.set("pre_tokenizer", std::move(pre));
  tj.tree.set("decoder", metaspace(prepend_scheme));
}

std::string prefix_scheme(const json::Value& config, std::string_view without_prefix) {
  return bool_or(config, "add_prefix_space", true) ? "always" : std::string(without_prefix);
}

void append_quote_replaces(json::Array& normalizers) {
  normalizers.push_back(json::parse(R"({"type": "Replace", "pattern": {"String": "``"}, "content": "\""})"));
  normalizers.push_back(json::parse(R"({"type": "Replace", "pattern": {"String": "''"}, "content": "\""})"));
}

void rebuild_words_bpe(TokenizerJson& tj, const json::Value& config, bool lowercase) {
  json::Value options = json::parse(R"({"end_of_word_suffix": "</w>"})");
  options.set("unk_token", special_token_or(config, "unk_token", "<unk>"));
  rebuild_model(tj, "BPE", json::dump(options));
  json::Value normalizer = json::parse(
      R"({"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null})");
  normalizer.set("lowercase", lowercase);  // accents go where case goes
  tj.tree.set("normalizer", std::move(normalizer));
  tj.tree.set("pre_tokenizer", json::parse(R"({"type": "BertPreTokenizer"})"));
  tj.tree.set("decoder", json::parse(R"({"type": "BPEDecoder", "suffix": "</w>"})"));
}

std::string special_token_or(const json::Value& config, std::string_view key, std::string_view fallback) {
  const json::Value* v = config.find(key);
  return v ? special_token_string(*v).value_or(std::string(fallback)) : std::string(fallback);
}

void append_missing(std::vector<std::string>& tokens, const std::string& token) {
  if (std::find(tokens.begin(), tokens.end(), token) == tokens.end()) tokens.push_back(token);
}

void append_luke_entity_extras(SpecialTokens& s, const json::Value& config) {
  append_missing(s.extra, special_token_or(config, "entity_token_1", "<ent>"));
  append_missing(s.extra, special_token_or(config, "entity_token_2", "<ent2>"));
}

}  // namespace tfm::tokenizer::classes

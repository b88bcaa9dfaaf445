#include "tfm/tokenizer/classes/classes.h"

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

json::Value file_precompiled(const TokenizerJson& tj) {
  const json::Value* normalizer = tj.tree.find("normalizer");
  if (!normalizer || !normalizer->is_object()) return {};
  const json::Value* found = nullptr;
  auto look = [&](const json::Value& stage) {
    if (!found && string_or(stage, "type", "") == "Precompiled" && stage.contains("precompiled_charsmap"))
      found = &stage;
  };
  if (string_or(*normalizer, "type", "") != "Sequence")
    look(*normalizer);
  else if (const json::Value* steps = normalizer->find("normalizers"); steps && steps->is_array())
    for (const json::Value& stage : steps->as_array()) look(stage);
  return found && !string_or(*found, "precompiled_charsmap", "").empty() ? *found : json::Value();
}

json::Value bos_eos_template(const Tokenizer& t, bool add_bos, bool add_eos) {
  json::Array single;
  json::Value special_tokens = json::Object{};
  auto add_special = [&](const std::optional<std::string>& token) {
    const std::optional<int64_t> id = token ? t.token_to_id(*token) : std::nullopt;
    if (!id) return;
    json::Value item = json::Object{};
    item.set("SpecialToken", json::parse(R"({"type_id": 0})"));
    item.find("SpecialToken")->set("id", *token);
    single.push_back(std::move(item));
    json::Value entry = json::Object{};
    entry.set("id", *token);
    entry.set("ids", json::Array{json::Value(*id)});
    entry.set("tokens", json::Array{json::Value(*token)});
    special_tokens.set(*token, std::move(entry));
  };
  if (add_bos) add_special(t.bos_token());
  single.push_back(json::parse(R"({"Sequence": {"id": "A", "type_id": 0}})"));
  if (add_eos) add_special(t.eos_token());
  json::Value out = json::Object{};
  out.set("type", "TemplateProcessing");
  out.set("single", std::move(single));
  out.set("special_tokens", std::move(special_tokens));
  return out;
}

std::string special_token_or(const json::Value& config, std::string_view key, std::string_view fallback) {
  const json::Value* v = config.find(key);
  return v ? special_token_string(*v).value_or(std::string(fallback)) : std::string(fallback);
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

}  // namespace

json::Value template_processing(const std::vector<std::string>& single, const std::vector<std::string>& pair,
                                const std::vector<std::pair<std::string, std::optional<int64_t>>>& special) {
  json::Value special_tokens = json::Object{};
  for (const auto& [token, id] : special) {
    check(id.has_value(), "special token '", token, "' of the class's template has no id");
    json::Value entry = json::Object{};
    entry.set("id", token);
    entry.set("ids", json::Array{json::Value(*id)});
    entry.set("tokens", json::Array{json::Value(token)});
    special_tokens.set(token, std::move(entry));
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

json::Value precompiled_normalizer(const TokenizerJson& tj) {
  const json::Value* n = tj.tree.find("normalizer");
  if (!n || !n->is_object()) return nullptr;
  const bool sequence = string_or(*n, "type", "") == "Sequence";
  const json::Array own{*n};
  const json::Value* list = sequence ? n->find("normalizers") : nullptr;
  for (const json::Value& entry : list && list->is_array() ? list->as_array() : own)
    if (string_or(entry, "type", "") == "Precompiled" && entry.contains("precompiled_charsmap")) return entry;
  return nullptr;
}

void set_whitespace_metaspace(TokenizerJson& tj, std::string_view prepend_scheme) {
  json::Value metaspace =
      json::parse(R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "", "split": true})");
  metaspace.set("prepend_scheme", std::string(prepend_scheme));
  json::Value pre = json::parse(R"({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}]})");
  pre.find("pretokenizers")->as_array().push_back(metaspace);
  tj.tree.set("pre_tokenizer", std::move(pre));
  tj.tree.set("decoder", std::move(metaspace));
}

std::optional<int64_t> unigram_piece_id(const TokenizerJson& tj, std::string_view piece) {
  json::Reader r(tj.vocab);
  check(r.peek() == json::Value::Type::array, "model: field 'vocab' must be an array of [\"piece\", score]");
  r.begin_array();
  for (int64_t i = 0; r.next_element(); ++i) {
    r.begin_array();
    check(r.next_element() && r.peek() == json::Value::Type::string, "model: vocab entry ", i,
          " must be [\"piece\", score]");
    const bool found = r.string() == piece;
    while (r.next_element()) r.skip();
    if (found) return i;
  }
  return std::nullopt;
}

}  // namespace tfm::tokenizer::classes

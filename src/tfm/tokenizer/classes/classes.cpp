#include "tfm/tokenizer/classes/classes.h"

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
  for (const char* stage : {"normalizer", "pre_tokenizer", "decoder"}) tj.tree.set(stage, nullptr);
  tj.exact_scores = true;  // the class gets the vocabulary through Python's json
}

json::Value bos_eos_template(const Tokenizer& t, bool add_bos, bool add_eos) {
  return special_template(
      t, {add_bos ? t.bos_token() : std::nullopt, "$A", add_eos ? t.eos_token() : std::nullopt});
}

json::Value special_template(const Tokenizer& t, std::initializer_list<std::optional<std::string>> items) {
  json::Array single;
  json::Value special_tokens = json::Object{};
  for (const std::optional<std::string>& token : items) {
    if (token == "$A") {
      single.push_back(json::parse(R"({"Sequence": {"id": "A", "type_id": 0}})"));
      continue;
    }
    const std::optional<int64_t> id = token ? t.token_to_id(*token) : std::nullopt;
    if (!id) continue;
    json::Value item = json::Object{};
    item.set("SpecialToken", json::parse(R"({"type_id": 0})"));
    item.find("SpecialToken")->set("id", *token);
    single.push_back(std::move(item));
    json::Value entry = json::Object{};
    entry.set("id", *token);
    entry.set("ids", json::Array{json::Value(*id)});
    entry.set("tokens", json::Array{json::Value(*token)});
    special_tokens.set(*token, std::move(entry));
  }
  json::Value out = json::Object{};
  out.set("type", "TemplateProcessing");
  out.set("single", std::move(single));
  out.set("special_tokens", std::move(special_tokens));
  return out;
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

json::Value precompiled_normalizer(const TokenizerJson& tj) {
  const json::Value* normalizer = tj.tree.find("normalizer");
  if (!normalizer || !normalizer->is_object()) return nullptr;
  auto is_precompiled = [](const json::Value& n) {
    return n.is_object() && string_or(n, "type", "") == "Precompiled" && n.contains("precompiled_charsmap");
  };
  if (string_or(*normalizer, "type", "") != "Sequence")
    return is_precompiled(*normalizer) ? *normalizer : nullptr;
  if (const json::Value* list = normalizer->find("normalizers"); list && list->is_array())
    for (const json::Value& n : list->as_array())
      if (is_precompiled(n)) return n;
  return nullptr;
}

json::Value metaspace(std::string_view prepend_scheme, bool split) {
  json::Value m = json::parse(R"({"type": "Metaspace", "replacement": "\u2581"})");
  m.set("prepend_scheme", std::string(prepend_scheme));
  m.set("split", split);
  return m;
}

std::string special_token_or(const json::Value& config, std::string_view key, std::string_view fallback) {
  const json::Value* v = config.find(key);
  return v ? special_token_string(*v).value_or(std::string(fallback)) : std::string(fallback);
}

}  // namespace tfm::tokenizer::classes

#include "tfm/tokenizer/classes/classes.h"

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

}  // namespace tfm::tokenizer::classes

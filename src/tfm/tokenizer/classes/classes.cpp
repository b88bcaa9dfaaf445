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

void rebuild_byte_level_bpe(TokenizerJson& tj, bool add_prefix_space) {
  rebuild_model(tj, "BPE",
                R"({"continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false})");
  json::Value pre = json::parse(R"({"type": "ByteLevel"})");
  pre.set("add_prefix_space", add_prefix_space);
  tj.tree.set("pre_tokenizer", std::move(pre));
  tj.tree.set("decoder", json::parse(R"({"type": "ByteLevel"})"));
}

std::optional<json::Value> precompiled_normalizer(const TokenizerJson& tj) {
  const json::Value* normalizer = tj.tree.find("normalizer");
  if (!normalizer || !normalizer->is_object()) return std::nullopt;
  const json::Value* type = normalizer->find("type");
  const json::Value* parts = type && type->is_string() && type->as_string() == "Sequence"
                                 ? normalizer->find("normalizers")
                                 : nullptr;
  auto is_precompiled = [](const json::Value& n) {
    const json::Value* t = n.is_object() ? n.find("type") : nullptr;
    return t && t->is_string() && t->as_string() == "Precompiled" && n.contains("precompiled_charsmap");
  };
  if (!parts) return is_precompiled(*normalizer) ? std::optional(*normalizer) : std::nullopt;
  for (const json::Value& n : parts->as_array())
    if (is_precompiled(n)) return n;
  return std::nullopt;
}

json::Value template_processing(const std::vector<TemplateToken>& prefix,
                                const std::vector<TemplateToken>& suffix) {
  json::Array single;
  json::Value special_tokens = json::Object{};
  auto add_special = [&](const TemplateToken& token) {
    json::Value item = json::Object{};
    item.set("SpecialToken", json::parse(R"({"type_id": 0})"));
    item.find("SpecialToken")->set("id", token.first);
    single.push_back(std::move(item));
    json::Value entry = json::Object{};
    entry.set("id", token.first);
    entry.set("ids", json::Array{json::Value(token.second)});
    entry.set("tokens", json::Array{json::Value(token.first)});
    special_tokens.set(token.first, std::move(entry));
  };
  for (const TemplateToken& token : prefix) add_special(token);
  single.push_back(json::parse(R"({"Sequence": {"id": "A", "type_id": 0}})"));
  for (const TemplateToken& token : suffix) add_special(token);
  json::Value out = json::Object{};
  out.set("type", "TemplateProcessing");
  out.set("single", std::move(single));
  out.set("special_tokens", std::move(special_tokens));
  return out;
}

json::Value bos_eos_template(const Tokenizer& t, bool add_bos, bool add_eos) {
  auto tokens = [&](bool add, const std::optional<std::string>& token) {
    std::vector<TemplateToken> out;
    if (const std::optional<int64_t> id = add && token ? t.token_to_id(*token) : std::nullopt)
      out.emplace_back(*token, *id);
    return out;
  };
  return template_processing(tokens(add_bos, t.bos_token()), tokens(add_eos, t.eos_token()));
}

std::string special_token_or(const json::Value& config, std::string_view key, std::string_view fallback) {
  const json::Value* v = config.find(key);
  return v ? special_token_string(*v).value_or(std::string(fallback)) : std::string(fallback);
}

}  // namespace tfm::tokenizer::classes

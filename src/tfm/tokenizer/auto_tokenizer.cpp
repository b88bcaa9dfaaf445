// AutoTokenizer::from_pretrained: tokenizer.json with tokenizer_config.json applied as Transformers
// (TokenizersBackend and the class named by tokenizer_class) applies it.
#include <algorithm>
#include <climits>
#include <filesystem>
#include <map>

#include "tfm/io/file.h"
#include "tfm/tokenizer/added_vocabulary.h"
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/processors/post_processor.h"
#include "tfm/tokenizer/tokenizer.h"
#include "tfm/tokenizer/tokenizer_class_choice.h"
#include "tfm/tokenizer/tokenizer_json.h"
#include "tfm/tokenizer/transformers_classes.h"

namespace tfm::tokenizer {
namespace {

namespace fs = std::filesystem;

json::Value read_config(const fs::path& dir) {
  const fs::path path = dir / "tokenizer_config.json";
  if (!fs::exists(path)) return json::Object{};
  json::Value config = json::parse_file(path.string());
  check(config.is_object(), path.string(), ": must hold an object");
  // Folders written before added_tokens_decoder existed keep their special tokens in special_tokens_map.json.
  const fs::path map_path = dir / "special_tokens_map.json";
  if (!config.contains("added_tokens_decoder") && fs::exists(map_path)) {
    const json::Value map = json::parse_file(map_path.string());
    check(map.is_object(), map_path.string(), ": must hold an object");
    for (const auto& [key, value] : map.as_object()) {
      const json::Value* own = config.find(key);
      const bool set = own && !own->is_null() && !(own->is_string() && own->as_string().empty()) &&
                       !(own->is_array() && own->size() == 0);
      if (!set) config.set(key, value);
    }
  }
  // Transformers 5 renamed additional_special_tokens.
  if (const json::Value* old = config.find("additional_special_tokens");
      old && !config.contains("extra_special_tokens"))
    config.set("extra_special_tokens", *old);
  // A chat_template.jinja file wins over the config's entry.
  if (const fs::path jinja = dir / "chat_template.jinja"; fs::exists(jinja))
    config.set("chat_template", io::read_file(jinja.string()));
  return config;
}

// The named special tokens: the config's value where it names one (null included), else the class default.
// The extra ones: a class passes its own as additional_special_tokens, which Transformers drops when the
// config has extra_special_tokens (a list or null; a dict names model-specific tokens instead).
SpecialTokens read_special_tokens(const json::Value& config, const TokenizerClass* cls) {
  SpecialTokens s = cls ? cls->defaults : SpecialTokens{};
  if (cls && cls->extra_special_tokens) s.extra = cls->extra_special_tokens(config);
  const std::pair<std::string_view, std::optional<std::string>*> named[] = {
      {"bos_token", &s.bos}, {"eos_token", &s.eos}, {"unk_token", &s.unk},  {"sep_token", &s.sep},
      {"pad_token", &s.pad}, {"cls_token", &s.cls}, {"mask_token", &s.mask}};
  for (const auto& [key, slot] : named) {
    if (const json::Value* v = config.find(key)) {
      try {
        *slot = special_token_string(*v);
      } catch (const Error& e) {
        throw_error("tokenizer_config.json: ", key, ": ", e.what());
      }
    }
  }
  const json::Value* extra = config.find("extra_special_tokens");
  if (extra && !extra->is_object()) {
    s.extra.clear();
    if (extra->is_array())
      for (const json::Value& t : extra->as_array())
        if (auto name = special_token_string(t)) s.extra.push_back(*name);
  }
  // Transformers 5's model-specific special tokens: the other "<name>_token" entries holding a token
  // (SplinterTokenizer's question_token, LUKE's entity tokens) and those of an extra_special_tokens object.
  // In its order: first the class's own arguments, in the order it passes them (CodeLlama's infill tokens),
  // and the config's entries holding AddedToken objects, which reach the class among its keyword arguments;
  // then the string ones and the object's, which from_pretrained took aside. A null drops a class's own
  // token.
  if (cls)
    for (const auto& [key, token] : cls->own_tokens) s.model_specific.emplace_back(key, token);
  auto add = [&](const std::string& key, const json::Value& v) {
    auto same = std::find_if(s.model_specific.begin(), s.model_specific.end(),
                             [&](const auto& m) { return m.first == key; });
    if (v.is_null() && same != s.model_specific.end()) {
      s.model_specific.erase(same);
    } else if (v.is_string() || (v.is_object() && v.contains("content"))) {
      if (same != s.model_specific.end())
        same->second = *special_token_string(v);
      else
        s.model_specific.emplace_back(key, *special_token_string(v));
    }
  };
  auto model_specific_key = [&](const std::string& key) {
    return key.ends_with("_token") &&
           std::none_of(std::begin(named), std::end(named), [&](const auto& n) { return n.first == key; });
  };
  for (const auto& [key, v] : config.as_object())
    if (model_specific_key(key) && v.is_object()) add(key, v);
  for (const auto& [key, v] : config.as_object())
    if (model_specific_key(key) && !v.is_object()) add(key, v);
  if (extra && extra->is_object())
    for (const auto& [key, v] : extra->as_object()) add(key, v);
  return s;
}

// added_tokens_decoder of the config, with tokenizer.json's added_tokens over it, in id order.
std::vector<AddedToken> declared_added_tokens(const json::Value& config, const json::Value& tokenizer_json) {
  std::map<int64_t, AddedToken> by_id;
  if (const json::Value* decoder = config.find("added_tokens_decoder"); decoder && decoder->is_object()) {
    for (const auto& [index, entry] : decoder->as_object()) {
      try {
        by_id[std::stoll(index)] = AddedToken::from_json(entry);
      } catch (const std::exception& e) {
        throw_error("tokenizer_config.json: added_tokens_decoder[\"", index, "\"]: ", e.what());
      }
    }
  }
  if (const json::Value* added = tokenizer_json.find("added_tokens"); added && added->is_array()) {
    for (size_t i = 0; i < added->size(); ++i) {
      try {
        const AddedToken t = AddedToken::from_json((*added)[i]);
        by_id[t.id] = t;
      } catch (const Error& e) {
        throw_error("tokenizer.json: added_tokens[", i, "]: ", e.what());
      }
    }
  }
  std::vector<AddedToken> out;
  for (auto& [id, t] : by_id) out.push_back(std::move(t));
  return out;
}

int64_t read_model_max_length(const json::Value& config) {
  const json::Value* v = config.find("model_max_length");
  if (!v || v->is_null()) return INT64_MAX;  // Transformers' VERY_LARGE_INTEGER (1e30), clipped
  if (v->is_int()) return v->as_int();
  const double d = v->as_double();
  return d >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(d);
}

}  // namespace

Tokenizer AutoTokenizer::from_pretrained(const std::string& dir, std::string_view name_or_path) {
  const fs::path root(dir);
  check(fs::is_directory(root), "tokenizer folder '", dir, "' does not exist");
  const fs::path json_path = root / "tokenizer.json";
  check(fs::exists(json_path), dir, ": no tokenizer.json (tfm reads the tokenizers-library format only)");
  json::Value config = read_config(root);

  // The class first: a folder tfm cannot read fails before its tokenizer.json is parsed.
  const fs::path model_config_path = root / "config.json";
  const json::Value model_config =
      fs::exists(model_config_path) ? json::parse_file(model_config_path.string()) : json::Value();
  const ChosenClass chosen =
      choose_tokenizer_class(model_config, config, name_or_path.empty() ? dir : name_or_path);
  check(chosen.kind != ClassKind::python, dir, ": ", chosen.name,
        " is a Python tokenizer that reads its own vocabulary files; tfm reads tokenizer.json only");
  const TokenizerClass* cls = chosen.kind == ClassKind::rebuild ? find_tokenizer_class(chosen.name) : nullptr;
  check(chosen.kind != ClassKind::rebuild || cls != nullptr, dir, ": ", chosen.name,
        " builds its own pipeline in Transformers, which tfm does not reproduce yet");

  TokenizerJson tj = TokenizerJson::read_file(json_path.string());
  check(tj.tree.is_object(), json_path.string(), ": must hold an object");
  const std::vector<AddedToken> declared = declared_added_tokens(config, tj.tree);
  const json::Value* file_post_processor = tj.tree.find("post_processor");
  const json::Value post_processor_in_file = file_post_processor ? *file_post_processor : json::Value();
  Tokenizer t = [&] {
    try {
      if (cls) {  // the class builds its own pipeline around the file's vocabulary; added tokens come later
        cls->rebuild(tj, config);
        tj.tree.set("added_tokens", json::Array{});
      }
      return Tokenizer::from_json(tj);
    } catch (const Error& e) {
      throw_error(json_path.string(), ": ", e.what());
    }
  }();
  tj = TokenizerJson();  // the file's text is no longer needed

  t.special_ = read_special_tokens(config, cls);
  if (cls && cls->special_tokens) cls->special_tokens(t.special_, config);
  t.class_ = cls;
  for (const AddedToken& a : declared) t.add_token(a);
  // Special tokens the added vocabulary lacks join it (Qwen2Tokenizer re-adds them all, resetting the
  // lstrip / rstrip of those already there).
  for (const std::string& name : t.all_special_tokens()) {
    if (t.added_->find(name) && !(cls && cls->readds_special_tokens)) continue;
    AddedToken a;
    a.content = name;
    a.special = true;
    a.normalized = false;
    t.add_token(a);
  }

  if (cls && cls->post_processor)
    if (std::optional<json::Value> p = cls->post_processor(t, config, post_processor_in_file))
      t.post_processor_ = make_post_processor(*p);
  // add_bos_token / add_eos_token are not read: Transformers 5 drops them whenever tokenizer.json exists, and
  // without a post-processor in the file its own template adds nothing either.
  t.split_special_tokens_ = bool_or(config, "split_special_tokens", false);
  t.clean_up_tokenization_spaces_ = bool_or(config, "clean_up_tokenization_spaces", false);
  t.model_max_length_ = read_model_max_length(config);
  t.config_ = std::move(config);
  return t;
}

}  // namespace tfm::tokenizer

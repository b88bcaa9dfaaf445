#include "tfm/tokenizer/models/model.h"

#include <climits>
#include <cstdio>

#include "tfm/tokenizer/json_fields.h"

namespace tfm::tokenizer {

Vocab::Vocab(std::vector<std::pair<std::string, int32_t>> entries) {
  int32_t max_id = -1;
  for (const auto& [token, id] : entries) {
    check(id >= 0, "vocabulary token '", token, "' has negative id ", id);
    // Ids may leave gaps, but not so many that the table would dwarf the vocabulary.
    check(static_cast<size_t>(id) < entries.size() + 65536, "vocabulary token '", token, "' has id ", id,
          ", far beyond the vocabulary's ", entries.size(), " entries");
    max_id = std::max(max_id, id);
  }
  tokens_.resize(static_cast<size_t>(max_id + 1));
  present_.resize(tokens_.size());
  for (auto& [token, id] : entries) {
    tokens_[id] = std::move(token);
    present_[id] = true;
  }
  ids_.reset(entries.size());
  for (size_t id = 0; id < tokens_.size(); ++id) {
    if (!present_[id]) continue;
    const int32_t before = ids_.insert(tokens_[id], static_cast<int32_t>(id), key_of());
    if (before >= 0)
      present_[before] = false;  // a token listed twice keeps its last id
    else
      ++size_;
  }
}

std::unique_ptr<Model> make_model(const json::Value& v) {
  return with_context("model", v, [&]() -> std::unique_ptr<Model> {
    const json::Value* type = v.find("type");
    // Old files leave out the type; the fields tell the model apart.
    std::string name = type && type->is_string() ? type->as_string() : "";
    if (name.empty()) {
      if (v.contains("merges"))
        name = "BPE";
      else if (v.contains("max_input_chars_per_word"))
        name = "WordPiece";
      else if (const json::Value* vocab = v.find("vocab"); vocab && vocab->is_array())
        name = "Unigram";
      else
        name = "WordLevel";
    }
    if (name == "BPE") return make_bpe(v);
    if (name == "Unigram") return make_unigram(v);
    if (name == "WordPiece") return make_word_piece(v);
    if (name == "WordLevel") return make_word_level(v);
    throw_error("unknown model type '", name, "'");
  });
}

Vocab vocab_from_object(const json::Value& v) {
  const json::Object& members = v.as_object();
  std::vector<std::pair<std::string, int32_t>> entries;
  entries.reserve(members.size());
  for (const auto& [token, id] : members) {
    check(id.is_int() && id.as_int() >= 0 && id.as_int() <= INT32_MAX, "vocab entry '", token,
          "' must have an integer id from 0 to 2^31-1");
    entries.emplace_back(token, static_cast<int32_t>(id.as_int()));
  }
  return Vocab(std::move(entries));
}

std::string byte_fallback_token(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
  return buf;
}

}  // namespace tfm::tokenizer

#include "tfm/tokenizer/added_vocabulary.h"

#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {

AddedToken AddedToken::from_json(const json::Value& v) {
  AddedToken t;
  t.content = required(v, "content").as_string();
  check(!t.content.empty(), "added token with an empty content");
  if (const json::Value* id = v.find("id")) t.id = static_cast<int32_t>(id->as_int());
  t.special = bool_or(v, "special", false);
  t.lstrip = bool_or(v, "lstrip", false);
  t.rstrip = bool_or(v, "rstrip", false);
  t.normalized = bool_or(v, "normalized", !t.special);
  t.single_word = bool_or(v, "single_word", false);
  return t;
}

void AddedVocabulary::add(const AddedToken& token, std::string match_text) {
  if (!match_text.empty()) first_bytes_.set(static_cast<unsigned char>(match_text[0]));
  if (auto it = by_content_.find(token.content); it != by_content_.end()) {
    by_id_.erase(tokens_[it->second].id);
    tokens_[it->second] = token;
    match_[it->second] = std::move(match_text);
    by_id_[token.id] = it->second;
    return;
  }
  by_content_[token.content] = tokens_.size();
  by_id_[token.id] = tokens_.size();
  tokens_.push_back(token);
  match_.push_back(std::move(match_text));
}

const AddedToken* AddedVocabulary::find(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

const std::string& AddedVocabulary::text(const AddedToken& token) const {
  return match_[&token - tokens_.data()];
}

const AddedToken* AddedVocabulary::find(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

namespace {

bool is_word_char(char32_t c) {
  return c == '_' || is_alphabetic(c) || is_numeric(c);
}

char32_t last_char(std::string_view text) {
  size_t b = text.size() - 1;
  while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
  return next_code_point(text, b);
}

}  // namespace

std::vector<Segment> AddedVocabulary::split(std::string_view text, bool normalized,
                                            bool match_special) const {
  std::vector<Segment> out;
  if (tokens_.empty()) {
    if (!text.empty()) out.push_back({text});
    return out;
  }
  size_t copied = 0;  // text before this offset is already in out
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_bytes_.test(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      continue;
    }
    const AddedToken* best = nullptr;  // the longest token that matches here
    size_t best_size = 0;
    for (size_t i = 0; i < tokens_.size(); ++i) {
      const AddedToken& t = tokens_[i];
      const std::string& m = match_[i];
      if (t.normalized != normalized || (t.special && !match_special) || m.empty()) continue;
      if (m.size() > best_size && text.compare(pos, m.size(), m) == 0) {
        best = &t;
        best_size = m.size();
      }
    }
    if (!best) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + best_size;
    if (best->single_word) {
      const bool starts_word = start == 0 || !is_word_char(last_char(text.substr(0, start)));
      size_t p = stop;
      const bool ends_word = stop == text.size() || !is_word_char(next_code_point(text, p));
      if (!starts_word || !ends_word) {  // not a word of its own: leave it to the model
        pos = stop;
        continue;
      }
    }
    if (best->lstrip)  // the whitespace before it, back to the previous match, joins the token
      start = copied + trimmed_range(text.substr(copied, start - copied), false, true, is_whitespace).second;
    if (best->rstrip) stop += trimmed_range(text.substr(stop), true, false, is_whitespace).first;
    if (start > copied) out.push_back({text.substr(copied, start - copied)});
    out.push_back({text.substr(start, stop - start), best->id});
    copied = pos = stop;
  }
  if (copied < text.size()) out.push_back({text.substr(copied)});
  return out;
}

}  // namespace tfm::tokenizer

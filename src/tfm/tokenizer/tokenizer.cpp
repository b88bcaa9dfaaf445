#include "tfm/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdint>

#include "tfm/core/parallel.h"
#include "tfm/tokenizer/added_vocabulary.h"
#include "tfm/tokenizer/decoders/decoder.h"
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/models/model.h"
#include "tfm/tokenizer/normalizers/normalizer.h"
#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"
#include "tfm/tokenizer/processors/post_processor.h"
#include "tfm/tokenizer/tokenizer_json.h"
#include "tfm/tokenizer/transformers_classes.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {

Tokenizer::Tokenizer() : added_(std::make_unique<AddedVocabulary>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_file(const std::string& path) {
  const TokenizerJson tj = TokenizerJson::read_file(path);
  try {
    return from_json(tj);
  } catch (const Error& e) {
    throw_error(path, ": ", e.what());
  }
}

Tokenizer Tokenizer::from_json(const TokenizerJson& tj) {
  const json::Value& v = tj.tree;
  check(v.is_object(), "tokenizer.json must hold an object, found ", json::Value::type_name(v.type()));
  Tokenizer t;
  const json::Value& model = required(v, "model");
  t.model_ = make_model(ModelJson{model, tj.vocab, tj.merges, *tj.text, tj.python_numbers});
  const json::Value* type = model.find("type");
  t.model_is_bpe_ = type && type->is_string() && type->as_string() == "BPE";
  const json::Value null;
  auto field = [&](std::string_view key) -> const json::Value& {
    const json::Value* f = v.find(key);
    return f ? *f : null;
  };
  t.normalizer_ = make_normalizer(field("normalizer"));
  t.pre_tokenizer_ = make_pre_tokenizer(field("pre_tokenizer"));
  t.post_processor_ = make_post_processor(field("post_processor"));
  t.decoder_ = make_decoder(field("decoder"));
  if (const json::Value& added = field("added_tokens"); !added.is_null()) {
    for (size_t i = 0; i < added.size(); ++i) {
      try {
        AddedToken token = AddedToken::from_json(added[i]);
        check(token.id >= 0, "missing or negative 'id'");
        t.added_->add(token, t.match_text(token));
      } catch (const Error& e) {
        throw_error("added_tokens[", i, "]: ", e.what());
      }
    }
  }
  return t;
}

void Tokenizer::add_token(AddedToken token) {
  // As the Rust library: a token already there keeps its id and takes the new settings.
  if (const AddedToken* existing = added_->find(token.content)) {
    token.id = existing->id;
  } else if (auto id = model_->vocab().find(token.content)) {
    token.id = *id;
  } else {  // the next id after the vocabulary and the added tokens beyond it
    int32_t next = static_cast<int32_t>(model_->vocab().size());
    for (const AddedToken& a : added_->tokens()) next = std::max(next, a.id + 1);
    token.id = next;
  }
  added_->add(token, match_text(token));
}

std::string Tokenizer::match_text(const AddedToken& token) const {
  std::string text = token.content;
  if (token.normalized && normalizer_) normalizer_->normalize(text);
  return text;
}

void Tokenizer::encode_text(std::string_view text, bool at_start, std::vector<int32_t>& ids) const {
  std::string normalized(text);
  if (normalizer_) normalizer_->normalize(normalized);
  const std::vector<Segment> segments =
      added_->split(normalized, /*normalized=*/true, !split_special_tokens_);
  std::vector<Piece> pieces;
  for (const Segment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    pieces.assign(1, Piece{std::string(s.text), at_start && s.text.data() == normalized.data()});
    if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(pieces);
    for (const Piece& p : pieces) model_->tokenize(p.text, ids);
  }
}

std::vector<int64_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const std::string valid = to_valid_utf8(text);
  std::vector<int32_t> ids;
  ids.reserve(valid.size() / 3 + 4);
  for (const Segment& s : added_->split(valid, /*normalized=*/false, !split_special_tokens_)) {
    if (s.id >= 0)
      ids.push_back(s.id);
    else
      encode_text(s.text, s.text.data() == valid.data(), ids);
  }
  if (add_special_tokens && post_processor_) post_processor_->process(ids);
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::vector<std::vector<int64_t>> Tokenizer::encode_batch(const std::vector<std::string>& texts,
                                                          bool add_special_tokens) const {
  std::vector<std::vector<int64_t>> out(texts.size());
  const auto n = static_cast<int64_t>(texts.size());
  parallel_for(n, {.enabled = n > 1, .chunk = 1}, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = encode(texts[i], add_special_tokens);
  });
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  // The tokenizers library takes ids as u32, and its Python binding raises OverflowError, in these words, for
  // an id outside; ids that fit but name no token are left out.
  for (int64_t id : ids) {
    check(id >= 0, "token id ", id, ": number too small to fit in target type");
    check(id <= UINT32_MAX, "token id ", id, ": number too large to fit in target type");
  }
  std::string text = class_ && class_->decode
                         ? class_->decode(*this, ids, skip_special_tokens,
                                          [&](const std::vector<int64_t>& kept) {
                                            return backend_decode(kept, skip_special_tokens);
                                          })
                         : backend_decode(ids, skip_special_tokens);
  // Transformers skips its cleanup for BPE models, where it would remove real spaces.
  if (clean_up_tokenization_spaces_ && !model_is_bpe_) text = clean_up_tokenization(std::move(text), false);
  return text;
}

std::string Tokenizer::backend_decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id > INT32_MAX) continue;
    if (const AddedToken* a = added_->find(static_cast<int32_t>(id))) {
      if (!(skip_special_tokens && a->special)) tokens.push_back(added_->text(*a));
    } else if (const std::string* t = model_->vocab().token(static_cast<int32_t>(id))) {
      tokens.push_back(*t);
    }
  }
  std::string text;
  if (decoder_) {
    decoder_->decode_chain(tokens);
    for (const std::string& t : tokens) text += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
  }
  return text;
}

std::optional<int64_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const AddedToken* a = added_->find(token)) return a->id;
  if (auto id = model_->vocab().find(token)) return *id;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::id_to_token(int64_t id) const {
  if (id < 0 || id > INT32_MAX) return std::nullopt;
  if (const AddedToken* a = added_->find(static_cast<int32_t>(id))) return added_->text(*a);
  if (const std::string* t = model_->vocab().token(static_cast<int32_t>(id))) return *t;
  return std::nullopt;
}

std::vector<std::optional<std::string>> Tokenizer::convert_ids_to_tokens(
    const std::vector<int64_t>& ids) const {
  std::vector<std::optional<std::string>> out;
  for (int64_t id : ids) out.push_back(id_to_token(id));
  return out;
}

std::vector<std::optional<int64_t>> Tokenizer::convert_tokens_to_ids(
    const std::vector<std::string>& tokens) const {
  std::vector<std::optional<int64_t>> out;
  for (const std::string& t : tokens) {
    auto id = token_to_id(t);
    out.push_back(id ? id : special_.unk ? token_to_id(*special_.unk) : std::nullopt);
  }
  return out;
}

std::optional<int64_t> Tokenizer::special_id(const std::optional<std::string>& token) const {
  if (!token) return std::nullopt;
  return convert_tokens_to_ids({*token})[0];
}

std::vector<std::string> Tokenizer::all_special_tokens() const {
  std::vector<std::string> out;
  auto push = [&](const std::string& t) {
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  };
  for (const auto* t : {&special_.bos, &special_.eos, &special_.unk, &special_.sep, &special_.pad,
                        &special_.cls, &special_.mask})
    if (*t) push(**t);
  for (const auto& [key, t] : special_.model_specific) push(t);
  for (const std::string& t : special_.extra) push(t);
  return out;
}

std::vector<int64_t> Tokenizer::all_special_ids() const {
  std::vector<int64_t> out;
  for (const auto& id : convert_tokens_to_ids(all_special_tokens()))
    if (id) out.push_back(*id);
  return out;
}

size_t Tokenizer::vocab_size() const {
  return model_->vocab().size();
}

size_t Tokenizer::size() const {
  size_t n = model_->vocab().size();
  for (const AddedToken& a : added_->tokens())
    if (!model_->vocab().token(a.id)) ++n;
  return n;
}

}  // namespace tfm::tokenizer

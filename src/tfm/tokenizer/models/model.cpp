#include "tfm/tokenizer/models/model.h"

#include <atomic>
#include <climits>
#include <cstdio>

#include "tfm/core/parallel.h"
#include "tfm/io/json_reader.h"
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
  // A token listed twice keeps its last id; each id that does not stay is reported by exactly one insert.
  const int64_t n = static_cast<int64_t>(tokens_.size());
  std::atomic<size_t> size{0};
  parallel_for(n, {.enabled = n > 4096}, [&](int64_t begin, int64_t end) {
    size_t kept = 0;
    for (int64_t id = begin; id < end; ++id) {
      if (!present_[id]) continue;
      const int32_t dropped = ids_.insert_concurrently(tokens_[id], static_cast<int32_t>(id), key_of());
      if (dropped >= 0)
        present_[dropped] = 0;  // a byte of its own: no other thread writes it
      else
        ++kept;
    }
    size += kept;
  });
  size_ += size;
}

std::unique_ptr<Model> make_model(const ModelJson& m) {
  return with_context("model", m.fields, [&]() -> std::unique_ptr<Model> {
    const json::Value* type = m.fields.find("type");
    // Old files leave out the type; the fields tell the model apart.
    std::string name = type && type->is_string() ? type->as_string() : "";
    if (name.empty()) {
      if (!m.merges.empty())
        name = "BPE";
      else if (m.fields.contains("max_input_chars_per_word"))
        name = "WordPiece";
      else if (m.vocab.starts_with('['))
        name = "Unigram";
      else
        name = "WordLevel";
    }
    // A model without merges still rejects a file whose merges are not JSON, as Python's json would.
    if (name != "BPE" && !m.merges.empty()) json::Reader(m.merges, m.document).skip();
    if (name == "BPE") return make_bpe(m);
    if (name == "Unigram") return make_unigram(m);
    if (name == "WordPiece") return make_word_piece(m);
    if (name == "WordLevel") return make_word_level(m);
    throw_error("unknown model type '", name, "'");
  });
}

Vocab vocab_from_object(const ModelJson& m) {
  check(!m.vocab.empty(), "missing field 'vocab'");
  json::Reader r(m.vocab, m.document);
  if (r.peek() != json::Value::Type::object)
    throw_error("field 'vocab' must be an object, found ", json::Value::type_name(r.peek()));
  std::vector<std::pair<std::string, int32_t>> entries;
  entries.reserve(m.vocab.size() / 16);  // about 16 bytes of JSON an entry
  r.begin_object();
  for (std::string_view token; r.next_member(token);) {
    const bool valid = r.peek() == json::Value::Type::integer;
    const int64_t id = valid ? r.integer() : -1;
    check(valid && id >= 0 && id <= INT32_MAX, "vocab entry '", token,
          "' must have an integer id from 0 to 2^31-1");
    entries.emplace_back(token, static_cast<int32_t>(id));
  }
  r.end();
  return Vocab(std::move(entries));
}

std::string byte_fallback_token(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
  return buf;
}

}  // namespace tfm::tokenizer

// Unigram: the segmentation of highest total log-probability (Viterbi over every vocabulary piece that
// matches), unknown characters as unk, which fuses with a neighbouring unk.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "tfm/io/json_reader.h"
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/models/model.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

constexpr double kUnkPenalty = 10.0;

class Unigram : public Model {
 public:
  Unigram(Vocab vocab, std::vector<double> scores, std::optional<int32_t> unk_id, bool byte_fallback)
      : vocab_(std::move(vocab)), scores_(std::move(scores)), unk_id_(unk_id), byte_fallback_(byte_fallback) {
    min_score_ = std::numeric_limits<double>::max();
    for (double s : scores_) min_score_ = std::min(min_score_, s);
    for (int32_t id = 0; id < static_cast<int32_t>(scores_.size()); ++id)
      if (const std::string* t = vocab_.token(id)) max_piece_bytes_ = std::max(max_piece_bytes_, t->size());
  }

  const Vocab& vocab() const override { return vocab_; }

  void tokenize(std::string_view piece, std::vector<int32_t>& ids) const override {
    for (std::string_view token : viterbi(piece)) {
      if (auto id = vocab_.find(token)) {
        ids.push_back(*id);
        continue;
      }
      if (byte_fallback_ && append_bytes(token, ids)) continue;
      check(unk_id_.has_value(),
            "Unigram model has no unk_id but the text has a character outside its vocabulary");
      ids.push_back(*unk_id_);
    }
  }

 private:
  bool append_bytes(std::string_view token, std::vector<int32_t>& ids) const {
    std::vector<int32_t> bytes;
    for (unsigned char b : token) {
      auto id = vocab_.find(byte_fallback_token(b));
      if (!id) return false;
      bytes.push_back(*id);
    }
    ids.insert(ids.end(), bytes.begin(), bytes.end());
    return true;
  }

  // The best segmentation as substrings of piece; consecutive unknown pieces are joined.
  std::vector<std::string_view> viterbi(std::string_view piece) const {
    const size_t n = piece.size();
    struct Node {
      double score = 0;
      size_t start = 0;
      int32_t id = -1;  // -1: unknown character
      bool reached = false;
    };
    std::vector<Node> best(n + 1);
    best[0].reached = true;
    const double unk_score = min_score_ - kUnkPenalty;
    size_t pos = 0;
    while (pos < n) {
      const size_t char_end = pos + utf8_length(static_cast<unsigned char>(piece[pos]));
      if (best[pos].reached) {
        bool single_char_piece = false;
        // Candidate ends at character boundaries, shortest first (the order of a trie's prefix search).
        for (size_t end = char_end; end <= n && end - pos <= max_piece_bytes_;
             end += end < n ? utf8_length(static_cast<unsigned char>(piece[end])) : 1) {
          if (auto id = vocab_.find(piece.substr(pos, end - pos))) {
            const double score = best[pos].score + scores_[*id];
            if (!best[end].reached || score > best[end].score) best[end] = {score, pos, *id, true};
            if (end == char_end) single_char_piece = true;
          }
          if (end == n) break;
        }
        if (!single_char_piece) {
          const double score = best[pos].score + unk_score;
          if (!best[char_end].reached || score > best[char_end].score)
            best[char_end] = {score, pos, -1, true};
        }
      }
      pos = char_end;
    }
    std::vector<std::string_view> tokens;
    bool previous_unknown = false;
    for (size_t end = n; end > 0; end = best[end].start) {
      const Node& node = best[end];
      std::string_view token = piece.substr(node.start, end - node.start);
      // The Rust library fuses by id: a vocabulary piece whose id is unk_id fuses as an unknown one does
      // (some Transformers classes fix unk_id at an id that is not the unk piece's).
      const bool unknown = node.id < 0 || (unk_id_ && node.id == *unk_id_);
      if (unknown && previous_unknown)  // fuse with the unknown piece after it
        tokens.back() =
            piece.substr(node.start, tokens.back().data() + tokens.back().size() - piece.data() - node.start);
      else
        tokens.push_back(token);
      previous_unknown = unknown;
    }
    std::reverse(tokens.begin(), tokens.end());
    return tokens;
  }

  Vocab vocab_;
  std::vector<double> scores_;
  std::optional<int32_t> unk_id_;
  bool byte_fallback_;
  double min_score_;
  size_t max_piece_bytes_ = 1;
};

// A score as the Rust library reads it. serde_json (without its float_roundtrip feature) gathers the digits
// into a u64, up to the first that would overflow it, and scales that by one power of ten: two roundings, so
// a few scores in a hundred land an ulp from the nearest double that Python's json (and Reader::number)
// gives. Enough to break a tie between two segmentations the other way.
double serde_json_number(std::string_view text) {
  static const std::array<double, 309> pow10 = [] {
    std::array<double, 309> p{};
    for (size_t i = 0; i < p.size(); ++i) p[i] = std::strtod(("1e" + std::to_string(i)).c_str(), nullptr);
    return p;
  }();
  size_t i = 0;
  auto is_digit = [&] { return i < text.size() && text[i] >= '0' && text[i] <= '9'; };
  auto invalid = [&] { throw_error("invalid number ", text); };
  auto out_of_range = [&] { throw_error("number ", text, " is out of range"); };
  const bool negative = i < text.size() && text[i] == '-';
  if (negative) ++i;
  uint64_t significand = 0;
  int64_t exponent = 0;
  // Appends the digit at i, false where the significand would overflow.
  auto append = [&] {
    const uint64_t digit = text[i] - '0';
    if (significand > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
    significand = significand * 10 + digit;
    return true;
  };
  if (!is_digit()) invalid();
  if (text[i] == '0') {
    ++i;
    if (is_digit()) invalid();  // one leading zero at most
  }
  for (bool full = false; is_digit(); ++i) {  // integer digits past a full significand scale it
    if (!full) full = !append();
    if (full) ++exponent;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (!is_digit()) invalid();
    for (bool full = false; is_digit(); ++i) {  // fraction digits past a full significand are dropped
      if (!full) full = !append();
      if (!full) --exponent;
    }
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const bool negative_exponent = i < text.size() && text[i] == '-';
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    if (!is_digit()) invalid();
    int64_t e = 0;
    for (; is_digit(); ++i)
      e = std::min<int64_t>(e * 10 + (text[i] - '0'), std::numeric_limits<int32_t>::max());
    exponent += negative_exponent ? -e : e;
  }
  if (i != text.size()) invalid();
  double f = static_cast<double>(significand);
  for (;;) {
    const uint64_t scale = exponent < 0 ? -exponent : exponent;
    if (scale < pow10.size()) {
      f = exponent >= 0 ? f * pow10[scale] : f / pow10[scale];
      break;
    }
    if (f == 0) break;
    if (exponent > 0) out_of_range();
    f /= 1e308;
    exponent += 308;
  }
  if (std::isinf(f)) out_of_range();
  return negative ? -f : f;
}

}  // namespace

std::unique_ptr<Model> make_unigram(const ModelJson& m) {
  check(!m.vocab.empty(), "missing field 'vocab'");
  json::Reader r(m.vocab, m.document);
  if (r.peek() != json::Value::Type::array)
    throw_error("field 'vocab' must be an array of [\"piece\", score], found ",
                json::Value::type_name(r.peek()));
  std::vector<std::pair<std::string, int32_t>> entries;
  std::vector<double> scores;
  r.begin_array();
  for (int32_t i = 0; r.next_element(); ++i) {
    auto bad = [&] { throw_error("vocab entry ", i, " must be [\"piece\", score]"); };
    if (r.peek() != json::Value::Type::array) bad();
    r.begin_array();
    if (!r.next_element() || r.peek() != json::Value::Type::string) bad();
    entries.emplace_back(r.string(), i);
    if (!r.next_element()) bad();
    const json::Value::Type t = r.peek();
    if (t != json::Value::Type::integer && t != json::Value::Type::number) bad();
    scores.push_back(m.exact_scores ? r.number() : serde_json_number(r.raw()));
    if (r.next_element()) bad();
  }
  r.end();
  const json::Value& v = m.fields;
  std::optional<int32_t> unk_id;
  if (const json::Value* u = v.find("unk_id"); u && !u->is_null()) {
    check(u->as_int() >= 0 && static_cast<size_t>(u->as_int()) < entries.size(), "unk_id ", u->as_int(),
          " is outside the vocabulary of ", entries.size());
    unk_id = static_cast<int32_t>(u->as_int());
  }
  return std::make_unique<Unigram>(Vocab(std::move(entries)), std::move(scores), unk_id,
                                   bool_or(v, "byte_fallback", false));
}

}  // namespace tfm::tokenizer

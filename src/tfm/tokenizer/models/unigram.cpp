// Unigram: the segmentation of highest total log-probability (Viterbi over every vocabulary piece that
// matches), unknown characters as unk. Neighbouring pieces of unk's id fuse, the vocabulary's own unk piece
// included (which matters where a class points unk_id at an ordinary piece), as in the Rust library.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

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
      ids.push_back(*unk_id_);  // viterbi yields pieces outside the vocabulary only where there is an unk
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

  // The best segmentation as substrings of piece; consecutive pieces of unk's id are joined.
  std::vector<std::string_view> viterbi(std::string_view piece) const {
    const size_t n = piece.size();
    struct Node {
      double score = 0;
      size_t start = 0;
      int32_t id = -1;
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
          // The Rust library fails on meeting such a character, off the best path and with byte fallback too.
          check(unk_id_.has_value(),
                "Unigram model has no unk_id but the text has a character outside its vocabulary");
          const double score = best[pos].score + unk_score;
          if (!best[char_end].reached || score > best[char_end].score)
            best[char_end] = {score, pos, *unk_id_, true};
        }
      }
      pos = char_end;
    }
    std::vector<std::string_view> tokens;
    bool previous_unk = false;
    for (size_t end = n; end > 0; end = best[end].start) {
      const Node& node = best[end];
      std::string_view token = piece.substr(node.start, end - node.start);
      const bool unk = node.id == unk_id_;
      if (unk && previous_unk)  // fuse with the unk piece after it
        tokens.back() =
            piece.substr(node.start, tokens.back().data() + tokens.back().size() - piece.data() - node.start);
      else
        tokens.push_back(token);
      previous_unk = unk;
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

// A score as the Rust library's serde_json reads it (without its float_roundtrip feature): up to 19 or 20
// significant digits as a u64, converted to double, then one multiplication or division by a power of ten.
// About one long score in a hundred comes out an ulp away from the correctly rounded value, which is enough
// to break a tie between two segmentations differently.
double serde_json_f64(std::string_view text) {
  static const std::vector<double> pow10 = [] {
    std::vector<double> p(309);
    for (size_t k = 0; k < p.size(); ++k) {
      const std::string s = "1e" + std::to_string(k);
      std::from_chars(s.data(), s.data() + s.size(), p[k]);
    }
    return p;
  }();
  check(text != "NaN" && text != "Infinity" && text != "-Infinity", "vocab score ", text, " is not a number");
  constexpr uint64_t kMax = UINT64_MAX;
  auto overflows = [&](uint64_t n, uint64_t digit) {
    return n >= kMax / 10 && (n > kMax / 10 || digit > kMax % 10);
  };
  size_t i = 0;
  const bool negative = text[i] == '-';
  if (negative) ++i;
  uint64_t significand = 0;
  int64_t exponent = 0;
  auto digit_at = [&](size_t k) { return k < text.size() && text[k] >= '0' && text[k] <= '9'; };
  for (bool overflow = false; digit_at(i); ++i) {  // past the u64, integer digits only scale
    const uint64_t d = static_cast<uint64_t>(text[i] - '0');
    overflow = overflow || overflows(significand, d);
    if (overflow)
      ++exponent;
    else
      significand = significand * 10 + d;
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; digit_at(i); ++i) {  // past the u64, fraction digits are dropped
      const uint64_t d = static_cast<uint64_t>(text[i] - '0');
      if (overflows(significand, d)) {
        while (digit_at(i)) ++i;
        break;
      }
      significand = significand * 10 + d;
      --exponent;
    }
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const bool negative_exponent = text[i] == '-';
    if (text[i] == '-' || text[i] == '+') ++i;
    int64_t e = 0;
    for (; digit_at(i); ++i) e = std::min<int64_t>(e * 10 + (text[i] - '0'), 1'000'000);
    exponent += negative_exponent ? -e : e;
  }
  double f = static_cast<double>(significand);
  while (f != 0) {
    if (exponent >= 0) {
      check(exponent < static_cast<int64_t>(pow10.size()) && std::isfinite(f * pow10[exponent]),
            "vocab score ", text, " is out of range");
      f *= pow10[exponent];
      break;
    }
    if (-exponent < static_cast<int64_t>(pow10.size())) {
      f /= pow10[-exponent];
      break;
    }
    f /= 1e308;
    exponent += 308;
  }
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
    scores.push_back(m.python_numbers ? r.number() : serde_json_f64(r.raw()));
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

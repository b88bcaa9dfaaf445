// BPE: a piece starts as characters (or byte tokens, or unk) and the ranked merges are applied lowest rank
// first. Results per piece are cached, as most pieces repeat.
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <queue>
#include <shared_mutex>
#include <unordered_map>

#include "tfm/core/parallel.h"
#include "tfm/io/json_reader.h"
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/models/model.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

struct MergeResult {
  int32_t rank;
  int32_t id;
};

// Lets the cache be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

struct Options {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class Bpe : public Model {
 public:
  Bpe(Vocab vocab, PairTable<MergeResult> merges, Options options)
      : vocab_(std::move(vocab)), merges_(std::move(merges)), o_(std::move(options)) {
    if (o_.unk_token) unk_id_ = vocab_.find(*o_.unk_token);
    if (o_.byte_fallback)
      for (int b = 0; b < 256; ++b)
        byte_ids_[b] = vocab_.find(byte_fallback_token(static_cast<unsigned char>(b)));
  }

  const Vocab& vocab() const override { return vocab_; }

  void tokenize(std::string_view piece, std::vector<int32_t>& ids) const override {
    if (piece.empty()) return;
    if (o_.ignore_merges)
      if (auto id = vocab_.find(piece)) {
        ids.push_back(*id);
        return;
      }
    {
      std::shared_lock lock(cache_mutex_);
      if (auto it = cache_.find(piece); it != cache_.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int32_t> result = merge_word(piece);
    ids.insert(ids.end(), result.begin(), result.end());
    std::unique_lock lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity && piece.size() < kMaxCachedPiece)
      cache_.emplace(std::string(piece), std::move(result));
  }

 private:
  static constexpr size_t kCacheCapacity = 10000;
  static constexpr size_t kMaxCachedPiece =
      256;  // long pieces (a whole text without pre-tokenizer) rarely repeat

  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };

  // The starting symbols: one per character, falling back to byte tokens or (fused) unk.
  std::vector<Symbol> initial_symbols(std::string_view piece) const {
    std::vector<Symbol> symbols;
    symbols.reserve(piece.size());
    auto push = [&](int32_t id) {
      symbols.push_back({id, static_cast<int32_t>(symbols.size()) - 1, 0, true});
    };
    int32_t pending_unk = -1;  // an unk waiting in case the next character is unknown too
    std::string s;
    size_t pos = 0;
    while (pos < piece.size()) {
      const size_t start = pos;
      pos += utf8_length(static_cast<unsigned char>(piece[pos]));
      std::string_view ch = piece.substr(start, pos - start);
      std::optional<int32_t> id;
      if (start > 0 && !o_.continuing_subword_prefix.empty()) {
        s = o_.continuing_subword_prefix;
        s += ch;
        if (pos == piece.size()) s += o_.end_of_word_suffix;
        id = vocab_.find(s);
      } else if (pos == piece.size() && !o_.end_of_word_suffix.empty()) {
        s = ch;
        s += o_.end_of_word_suffix;
        id = vocab_.find(s);
      } else {
        s = ch;
        id = vocab_.find(ch);
      }
      if (id) {
        if (pending_unk >= 0) push(pending_unk);
        pending_unk = -1;
        push(*id);
        continue;
      }
      if (o_.byte_fallback && all_bytes_known(s)) {
        for (unsigned char b : s) push(*byte_ids_[b]);
        continue;
      }
      if (unk_id_) {
        if (pending_unk >= 0 && !o_.fuse_unk) push(pending_unk);
        pending_unk = *unk_id_;
      }
    }
    if (pending_unk >= 0) push(pending_unk);
    for (size_t i = 0; i < symbols.size(); ++i) symbols[i].next = i + 1 < symbols.size() ? i + 1 : -1;
    return symbols;
  }

  bool all_bytes_known(std::string_view s) const {
    for (unsigned char b : s)
      if (!byte_ids_[b]) return false;
    return true;
  }

  const MergeResult* find_merge(int32_t a, int32_t b) const { return merges_.find(a, b); }

  std::vector<int32_t> merge_word(std::string_view piece) const {
    std::vector<Symbol> sym = initial_symbols(piece);
    struct Candidate {
      int32_t rank, pos, id;
      bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
    for (size_t i = 0; i + 1 < sym.size(); ++i)
      if (const MergeResult* m = find_merge(sym[i].id, sym[i + 1].id))
        queue.push({m->rank, static_cast<int32_t>(i), m->id});
    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& left = sym[top.pos];
      if (!left.alive || left.next < 0) continue;
      Symbol& right = sym[left.next];
      const MergeResult* m = find_merge(left.id, right.id);
      if (!m || m->id != top.id) continue;  // the pair changed since this candidate was queued
      left.id = top.id;
      right.alive = false;
      left.next = right.next;
      if (right.next >= 0) sym[right.next].prev = top.pos;
      if (left.prev >= 0)
        if (const MergeResult* p = find_merge(sym[left.prev].id, left.id))
          queue.push({p->rank, left.prev, p->id});
      if (left.next >= 0)
        if (const MergeResult* n = find_merge(left.id, sym[left.next].id))
          queue.push({n->rank, top.pos, n->id});
    }
    std::vector<int32_t> out;
    for (const Symbol& s : sym)
      if (s.alive) out.push_back(s.id);
    return out;
  }

  Vocab vocab_;
  PairTable<MergeResult> merges_;
  Options o_;
  std::optional<int32_t> unk_id_;
  std::optional<int32_t> byte_ids_[256];
  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

// Finds a token of a merge; the error names the merge.
int32_t merge_token_id(const Vocab& vocab, std::string_view token, size_t rank) {
  auto id = vocab.find(token);
  check(id.has_value(), "merge ", rank, " names token '", token, "', which is not in the vocabulary");
  return *id;
}

// The merges as written: the two tokens' texts, pointing into the JSON text or, for tokens written with
// escapes, into `unescaped`.
struct MergeTexts {
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  std::deque<std::string> unescaped;  // a deque: its strings never move
};

// Reads "a b" and ["a", "b"] merges.
MergeTexts read_merges(const ModelJson& m) {
  check(!m.merges.empty(), "missing field 'merges'");
  json::Reader r(m.merges, m.document);
  if (r.peek() != json::Value::Type::array)
    throw_error("field 'merges' must be an array, found ", json::Value::type_name(r.peek()));
  MergeTexts out;
  out.pairs.reserve(m.merges.size() / 12);  // about 12 bytes of JSON a merge
  auto keep = [&](std::string_view s) {
    return r.in_text(s) ? s : std::string_view(out.unescaped.emplace_back(s));
  };
  r.begin_array();
  for (size_t rank = 0; r.next_element(); ++rank) {
    const json::Value::Type type = r.peek();
    if (type == json::Value::Type::string) {
      const std::string_view s = keep(r.string());
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        throw_error("merge ", rank, " must be two tokens separated by one space, found '", s, "'");
      out.pairs.emplace_back(s.substr(0, space), s.substr(space + 1));
      continue;
    }
    auto bad = [&] { throw_error("merge ", rank, " must be \"a b\" or [\"a\", \"b\"]"); };
    if (type != json::Value::Type::array) bad();
    r.begin_array();
    if (!r.next_element() || r.peek() != json::Value::Type::string) bad();
    const std::string_view a = keep(r.string());
    if (!r.next_element() || r.peek() != json::Value::Type::string) bad();
    const std::string_view b = keep(r.string());
    if (r.next_element()) bad();
    out.pairs.emplace_back(a, b);
  }
  r.end();
  return out;
}

struct ResolvedMerge {
  int32_t a = -1, b = -1, id = -1;
};

// The ids of a merge's two tokens and of the token they make. `guess` is the id the merged token probably
// has (trained vocabularies mostly number merged tokens in merge order), checked with one string compare
// before a hash lookup. `merged` is scratch space.
ResolvedMerge resolve_merge(std::string_view a, std::string_view b, const Vocab& vocab, size_t rank,
                            size_t prefix, int32_t guess, std::string& merged) {
  const int32_t a_id = merge_token_id(vocab, a, rank);
  const int32_t b_id = merge_token_id(vocab, b, rank);
  merged.assign(a);
  merged.append(b.substr(std::min(prefix, b.size())));  // b's continuing-subword prefix is not repeated
  const std::string* guessed = vocab.token(guess);
  return ResolvedMerge{a_id, b_id,
                       guessed && *guessed == merged ? guess : merge_token_id(vocab, merged, rank)};
}

}  // namespace

std::unique_ptr<Model> make_bpe(const ModelJson& m) {
  const json::Value& v = m.fields;
  Options o;
  if (const json::Value* u = v.find("unk_token"); u && !u->is_null()) o.unk_token = u->as_string();
  o.continuing_subword_prefix = string_or(v, "continuing_subword_prefix", "");
  o.end_of_word_suffix = string_or(v, "end_of_word_suffix", "");
  o.fuse_unk = bool_or(v, "fuse_unk", false);
  o.byte_fallback = bool_or(v, "byte_fallback", false);
  o.ignore_merges = bool_or(v, "ignore_merges", false);
  if (const json::Value* d = v.find("dropout"); d && !d->is_null() && d->as_double() > 0)
    throw_error("BPE dropout is random and not supported (dropout ", d->as_double(), ")");

  // The vocabulary and the merges' text are read at the same time; a bad vocabulary is reported first.
  std::future<MergeTexts> reading = std::async(std::launch::async, read_merges, std::cref(m));
  Vocab vocab = vocab_from_object(m);
  const MergeTexts texts = reading.get();

  // Resolving 150k merges to ids takes 3 hash lookups each, and each is independent of the others: they
  // run in parallel, and only the table is filled in order. The first bad merge is reported.
  const size_t n = texts.pairs.size();
  std::vector<ResolvedMerge> resolved(n);
  const size_t prefix = o.continuing_subword_prefix.size();
  parallel_for(static_cast<int64_t>(n), {.enabled = n > 4096}, [&](int64_t begin, int64_t end) {
    int32_t guess = -1;  // a range of consecutive ranks mostly resolves to consecutive ids
    std::string merged;
    for (auto rank = static_cast<size_t>(begin); rank < static_cast<size_t>(end); ++rank) {
      const auto& [a, b] = texts.pairs[rank];
      resolved[rank] = resolve_merge(a, b, vocab, rank, prefix, guess, merged);
      guess = resolved[rank].id + 1;
    }
  });
  PairTable<MergeResult> merges;
  merges.reset(n);
  for (size_t rank = 0; rank < n; ++rank) {
    const ResolvedMerge& merge = resolved[rank];
    merges.insert_or_assign(merge.a, merge.b,
                            MergeResult{static_cast<int32_t>(rank), merge.id});  // last wins, as Rust
  }
  return std::make_unique<Bpe>(std::move(vocab), std::move(merges), std::move(o));
}

}  // namespace tfm::tokenizer

#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"

#include "tfm/tokenizer/json_fields.h"

namespace tfm::tokenizer {

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const json::Value& v) {
  if (v.is_null()) return nullptr;
  return with_context("pre_tokenizer", v, [&]() -> std::unique_ptr<PreTokenizer> {
    const std::string& type = required(v, "type").as_string();
    if (type == "ByteLevel") return make_byte_level_pre_tokenizer(v);
    if (type == "Split") return make_split(v);
    if (type == "Whitespace") return make_whitespace(v);
    if (type == "WhitespaceSplit") return make_whitespace_split(v);
    if (type == "Metaspace") return make_metaspace_pre_tokenizer(v);
    if (type == "Digits") return make_digits(v);
    if (type == "Punctuation") return make_punctuation(v);
    if (type == "BertPreTokenizer") return make_bert_pre_tokenizer(v);
    if (type == "UnicodeScripts") return make_unicode_scripts(v);
    if (type == "CharDelimiterSplit") return make_char_delimiter_split(v);
    if (type == "Sequence") return make_pre_tokenizer_sequence(v);
    throw_error("unknown pre_tokenizer type '", type, "'");
  });
}

SplitBehavior parse_split_behavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::removed;
  if (name == "Isolated") return SplitBehavior::isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (name == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (name == "Contiguous") return SplitBehavior::contiguous;
  throw_error("unknown split behavior '", name, "'");
}

namespace {

// Cuts one piece. Each part is (start, end, is_match); the behaviour decides what is kept and joined.
void split_one(const Piece& piece, const std::vector<std::pair<size_t, size_t>>& matches,
               SplitBehavior behavior, bool invert, std::vector<Piece>& out) {
  struct Part {
    size_t start, end;
    bool match;
  };
  std::vector<Part> parts;
  size_t last = 0;
  for (const auto& [s, e] : matches) {
    if (s > last) parts.push_back({last, s, invert});
    parts.push_back({s, e, !invert});
    last = e;
  }
  if (last < piece.text.size()) parts.push_back({last, piece.text.size(), invert});

  std::vector<std::pair<size_t, size_t>> kept;
  switch (behavior) {
    case SplitBehavior::removed:
      for (const Part& p : parts)
        if (!p.match) kept.emplace_back(p.start, p.end);
      break;
    case SplitBehavior::isolated:
      for (const Part& p : parts) kept.emplace_back(p.start, p.end);
      break;
    case SplitBehavior::contiguous:  // neighbours of the same kind join (two gaps can meet when inverted)
      for (size_t i = 0; i < parts.size(); ++i) {
        if (i > 0 && parts[i].match == parts[i - 1].match)
          kept.back().second = parts[i].end;
        else
          kept.emplace_back(parts[i].start, parts[i].end);
      }
      break;
    case SplitBehavior::merged_with_previous:
      for (size_t i = 0; i < parts.size(); ++i) {
        if (parts[i].match && !kept.empty() && !parts[i - 1].match)
          kept.back().second = parts[i].end;
        else
          kept.emplace_back(parts[i].start, parts[i].end);
      }
      break;
    case SplitBehavior::merged_with_next: {
      bool open = false;  // the last kept part is a match waiting for the text after it
      for (const Part& p : parts) {
        if (open && !p.match) {
          kept.back().second = p.end;
          open = false;
        } else {
          kept.emplace_back(p.start, p.end);
          open = p.match;
        }
      }
      break;
    }
  }
  for (const auto& [s, e] : kept) out.push_back({piece.text.substr(s, e - s), piece.at_start && s == 0});
}

}  // namespace

void split_pieces(std::vector<Piece>& pieces, const MatchFinder& matches, SplitBehavior behavior,
                  bool invert) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  for (const Piece& p : pieces) split_one(p, matches(p.text), behavior, invert, out);
  pieces = std::move(out);
}

}  // namespace tfm::tokenizer

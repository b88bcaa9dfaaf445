// Metaspace: SentencePiece's view of spaces. Spaces become "▁", a "▁" is prepended (always, only at the start
// of the input, or never) and, with split, each "▁" starts a new piece.
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"
#include "tfm/tokenizer/pre_tokenizers/prepend_scheme.h"
#include "tfm/tokenizer/regex.h"

namespace tfm::tokenizer {

PrependScheme parse_prepend_scheme(const json::Value& v) {
  // Files written before prepend_scheme existed have add_prefix_space instead.
  if (const json::Value* s = v.find("prepend_scheme"); s && !s->is_null()) {
    const std::string& name = s->as_string();
    if (name == "always") return PrependScheme::always;
    if (name == "first") return PrependScheme::first;
    if (name == "never") return PrependScheme::never;
    throw_error("unknown prepend_scheme '", name, "'");
  }
  return bool_or(v, "add_prefix_space", true) ? PrependScheme::always : PrependScheme::never;
}

namespace {

class Metaspace : public PreTokenizer {
 public:
  Metaspace(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}

  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (Piece& p : pieces) {
      std::string text;
      text.reserve(p.text.size() + replacement_.size());
      for (char c : p.text) {
        if (c == ' ')
          text += replacement_;
        else
          text += c;
      }
      const bool prepend =
          scheme_ == PrependScheme::always || (scheme_ == PrependScheme::first && p.at_start);
      if (prepend && !text.empty() && text.compare(0, replacement_.size(), replacement_) != 0)
        text.insert(0, replacement_);
      p.text = std::move(text);
    }
    if (split_) {
      split_pieces(
          pieces,
          [&](std::string_view t) {
            std::vector<std::pair<size_t, size_t>> out;
            for (size_t at = t.find(replacement_); at != std::string_view::npos;
                 at = t.find(replacement_, at + replacement_.size()))
              out.emplace_back(at, at + replacement_.size());
            return out;
          },
          SplitBehavior::merged_with_next);
    }
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_metaspace_pre_tokenizer(const json::Value& v) {
  return std::make_unique<Metaspace>(string_or(v, "replacement", "\xE2\x96\x81"), parse_prepend_scheme(v),
                                     bool_or(v, "split", true));
}

}  // namespace tfm::tokenizer

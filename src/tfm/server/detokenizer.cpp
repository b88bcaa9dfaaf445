#include "tfm/server/detokenizer.h"

#include <algorithm>
#include <string_view>

namespace tfm::server {
namespace {

bool ends_with_incomplete_character(std::string_view text) {
  return text.ends_with("\xEF\xBF\xBD");  // U+FFFD
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(DecodeFn decode, std::vector<std::string> stop_strings)
    : decode_(std::move(decode)), stop_strings_(std::move(stop_strings)) {}

std::string IncrementalDetokenizer::add(std::span<const int64_t> tokens) {
  if (stopped_) return {};
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  decode_window(false);
  return release(false);
}

std::string IncrementalDetokenizer::finish() {
  if (stopped_) return {};
  decode_window(true);
  return release(true);
}

void IncrementalDetokenizer::decode_window(bool whole) {
  if (settled_end_ == tokens_.size()) return;
  const auto from = tokens_.begin() + static_cast<std::ptrdiff_t>(window_start_);
  const std::string before = decode_({from, tokens_.begin() + static_cast<std::ptrdiff_t>(settled_end_)});
  const std::string after = decode_({from, tokens_.end()});
  // A token that adds no text yet (a skipped special token, the first bytes of a character) waits for more.
  if (!whole && (after.size() <= before.size() || ends_with_incomplete_character(after))) return;
  if (after.size() > before.size()) text_.append(after, before.size());
  window_start_ = settled_end_;
  settled_end_ = tokens_.size();
}

std::string IncrementalDetokenizer::release(bool final) {
  // Nothing handed out can be the start of a stop string (it was held back), so matches begin in the rest.
  size_t stop_at = std::string::npos;
  for (const std::string& s : stop_strings_) stop_at = std::min(stop_at, text_.find(s, released_));
  size_t end = text_.size();
  if (stop_at != std::string::npos) {
    end = stop_at;
    stopped_ = true;
  } else if (!final) {
    const std::string_view pending = std::string_view(text_).substr(released_);
    size_t hold = 0;
    for (const std::string& s : stop_strings_) {
      for (size_t k = std::min(s.size() - 1, pending.size()); k > hold; --k) {
        if (pending.ends_with(std::string_view(s).substr(0, k))) {
          hold = k;
          break;
        }
      }
    }
    end -= hold;
  }
  std::string out = text_.substr(released_, end - released_);
  released_ = end;
  return out;
}

}  // namespace tfm::server

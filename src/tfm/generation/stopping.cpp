#include "tfm/generation/stopping.h"

#include <algorithm>

#include "tfm/core/error.h"
#include "tfm/core/logging.h"

namespace tfm {

StopStringCriteria::StopStringCriteria(std::vector<std::string> stop_strings, DecodeFn decode)
    : stop_strings_(std::move(stop_strings)), decode_(std::move(decode)), window_(0) {
  check(static_cast<bool>(decode_),
        "There are one or more stop strings, either in the arguments to `generate` or in the model's "
        "generation "
        "config, but we could not locate a tokenizer. When generating with stop strings, you must pass the "
        "model's "
        "tokenizer to the `tokenizer` argument of `generate`.");
  check(!stop_strings_.empty(), "stop_strings is an empty list");
  for (const std::string& s : stop_strings_) {
    check(!s.empty(), "stop_strings holds an empty string, which would match everywhere");
    window_ = std::max(window_, s.size() + 1);
  }
}

std::optional<size_t> StopStringCriteria::match(std::span<const int64_t> input_ids) const {
  if (input_ids.empty()) return std::nullopt;
  // Decode a window ending at the newest token, with one token more than any match can span, so that a
  // decoder's special handling of the first token (a stripped leading space) stays outside the match.
  const std::span<const int64_t> window =
      input_ids.subspan(input_ids.size() - std::min(window_, input_ids.size()));
  const std::vector<int64_t> ids(window.begin(), window.end());
  const std::string text = decode_(ids);
  const std::string before = decode_(std::vector<int64_t>(ids.begin(), ids.end() - 1));
  // The newest token's text starts where the two decodings part (an incomplete UTF-8 character at the end of
  // `before` decodes differently once completed, so it counts as part of the newest token).
  const size_t newest = static_cast<size_t>(
      std::mismatch(before.begin(), before.end(), text.begin(), text.end()).second - text.begin());
  for (size_t i = 0; i < stop_strings_.size(); ++i) {
    const std::string& s = stop_strings_[i];
    // A match must end after `newest`, so it starts after newest - s.size().
    const size_t from = newest + 1 > s.size() ? newest + 1 - s.size() : 0;
    if (text.find(s, from) != std::string::npos) return i;
  }
  return std::nullopt;
}

StoppingCriteria::StoppingCriteria(const GenerationConfig& config, int64_t max_length, DecodeFn decode,
                                   std::optional<int64_t> max_position_embeddings)
    : max_length_(max_length),
      max_position_embeddings_(max_position_embeddings),
      max_time_(config.max_time),
      start_(std::chrono::steady_clock::now()),
      eos_(config.eos_token_id.value_or(std::vector<int64_t>{})) {
  if (config.stop_strings) stop_strings_.emplace(*config.stop_strings, std::move(decode));
}

StopReason StoppingCriteria::check(std::span<const int64_t> input_ids) const {
  const auto length = static_cast<int64_t>(input_ids.size());
  if (length >= max_length_) return StopReason::max_length;
  if (max_position_embeddings_ && length > *max_position_embeddings_) {
    logging::log_once(
        logging::Level::warning,
        "This is a friendly reminder - the current text generation call has exceeded the model's "
        "predefined maximum length (" +
            std::to_string(*max_position_embeddings_) +
            "). Depending on the model, you may observe exceptions, performance degradation, or "
            "nothing at all.");
  }
  if (max_time_) {
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
    if (elapsed.count() > *max_time_) return StopReason::max_time;
  }
  if (stop_strings_ && stop_strings_->match(input_ids)) return StopReason::stop_string;
  if (!input_ids.empty() && std::find(eos_.begin(), eos_.end(), input_ids.back()) != eos_.end()) {
    return StopReason::eos;
  }
  return StopReason::none;
}

}  // namespace tfm

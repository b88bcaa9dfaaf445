#include "tfm/train/assistant_labels.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/tokenizer/tokenizer.h"

namespace tfm {
namespace {

using Tokens = std::vector<int64_t>;

// The first `count` messages rendered and tokenized.
Tokens render_tokens(const json::Value& messages, size_t count, bool add_generation_prompt,
                     const std::string& source, const tokenizer::Tokenizer& tokenizer) {
  ChatTemplateInputs inputs;
  inputs.messages = json::Array(messages.as_array().begin(), messages.as_array().begin() + count);
  inputs.add_generation_prompt = add_generation_prompt;
  // The template writes the special tokens itself.
  return tokenizer.encode(render_chat_template(source, tokenizer.config(), inputs),
                          /*add_special_tokens=*/false);
}

size_t common_prefix(const Tokens& a, const Tokens& b) {
  return std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
}

// The largest k with tail[tail.size() - k:] == next[:k]: Knuth-Morris-Pratt with next's first tokens as the
// pattern, run over tail, ends in the state of the longest pattern prefix that tail ends with.
size_t longest_tail_continued(std::span<const int64_t> tail, std::span<const int64_t> next) {
  const std::span<const int64_t> pattern = next.first(std::min(tail.size(), next.size()));
  if (pattern.empty()) return 0;
  std::vector<size_t> border(pattern.size(),
                             0);  // of pattern[:i+1]: its longest proper prefix that is a suffix
  for (size_t i = 1, k = 0; i < pattern.size(); ++i) {
    while (k > 0 && pattern[i] != pattern[k]) k = border[k - 1];
    if (pattern[i] == pattern[k]) ++k;
    border[i] = k;
  }
  size_t matched = 0;
  for (const int64_t token : tail) {
    if (matched == pattern.size()) matched = border[matched - 1];
    while (matched > 0 && token != pattern[matched]) matched = border[matched - 1];
    if (token == pattern[matched]) ++matched;
  }
  return matched;
}

}  // namespace

TrainingExample tokenize_with_assistant_labels(const json::Value& messages, const std::string& source,
                                               const tokenizer::Tokenizer& tokenizer) {
  const Tokens full = render_tokens(messages, messages.size(), false, source, tokenizer);
  TrainingExample example;
  // The tokenizer's ids are 32-bit (its vocabulary is indexed so).
  example.input_ids.assign(full.begin(), full.end());
  example.labels.assign(full.size(), kIgnoreIndex);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].at("role").as_string() != "assistant") continue;
    check(i > 0, "the conversation starts with an assistant message: there is no prompt to render before it");
    const Tokens prompt = render_tokens(messages, i, true, source, tokenizer);
    const size_t start = common_prefix(prompt, full);
    const Tokens with_message = render_tokens(messages, i + 1, false, source, tokenizer);
    check(start + 1 >= prompt.size() && common_prefix(with_message, full) >= start,
          "the chat template renders the conversation before message ", i,
          " differently from the whole conversation's beginning, so the assistant's tokens cannot be found");
    const size_t length =
        longest_tail_continued(std::span(with_message).subspan(start), std::span(full).subspan(start));
    check(length > 0, "assistant message ", i, " renders no tokens that the whole conversation has");
    std::copy_n(full.begin() + start, length, example.labels.begin() + start);
  }
  return example;
}

}  // namespace tfm

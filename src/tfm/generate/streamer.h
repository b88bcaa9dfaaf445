// TextStreamer with the semantics of Transformers' generation/streamers.py: generate() puts the prompt first,
// then each new token; text is handed on as soon as it is settled. After a newline the whole cache is
// flushed; when the text ends with a CJK character it is all handed on; otherwise only up to the last space,
// which also holds back a trailing U+FFFD (an incomplete UTF-8 character) and a word that the next token may
// extend. end() flushes the rest. Positions count code points, as Python's str does.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/generation/decode_fn.h"

namespace tfm {

class TextStreamer {
 public:
  // Receives each piece of settled text; stream_end is true on the call made by end(). Pieces may be empty,
  // as Transformers' on_finalized_text receives them.
  using OnText = std::function<void(std::string_view text, bool stream_end)>;

  TextStreamer(DecodeFn decode, OnText on_text, bool skip_prompt = false);

  // Tokens of one sequence: the prompt on the first call (dropped when skip_prompt), then the new tokens.
  void put(std::span<const int64_t> tokens);
  // Flushes what is left and makes the next put() a prompt again.
  void end();

 private:
  DecodeFn decode_;
  OnText on_text_;
  bool skip_prompt_;
  std::vector<int64_t> token_cache_;
  size_t print_len_ = 0;  // code points of the decoded cache already handed on
  bool next_tokens_are_prompt_ = true;
};

// Whether a code point lies in the CJK Unified Ideographs blocks TextStreamer flushes on.
bool is_cjk_code_point(uint32_t cp);

}  // namespace tfm

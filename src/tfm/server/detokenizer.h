// Generated tokens to text while they come, for streaming: text is handed out as soon as it is settled, and
// what is handed out, joined, is the text of the whole generation.
//
// Settled means: the last character is whole (the decoder gives U+FFFD for a character whose bytes are not
// all there yet, as TextStreamer relies on), and no stop string can still begin in it. Each step decodes a
// short window of tokens, not the whole generation: the window starts one settled piece back, so a decoder
// that treats the first token of a text differently (a stripped leading space) sees the same context it sees
// in the whole text.
//
// Stop strings end the text where they begin; a suffix that could be the start of one is held back until the
// next tokens decide.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tfm/generation/decode_fn.h"

namespace tfm::server {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(DecodeFn decode, std::vector<std::string> stop_strings);

  // Adds generated tokens; returns the text they settled (often empty). Nothing follows a stop string.
  std::string add(std::span<const int64_t> tokens);
  // The generation ended: the text not handed out yet (up to a stop string).
  std::string finish();
  // A stop string was found; the text ends before it.
  bool stopped() const { return stopped_; }

 private:
  // Decodes what the window gained past its settled piece; appends it to text_ when `whole` holds or the
  // last character is complete.
  void decode_window(bool whole);
  // The settled text not handed out yet, less a possible start of a stop string unless `final`.
  std::string release(bool final);

  DecodeFn decode_;
  std::vector<std::string> stop_strings_;
  std::vector<int64_t> tokens_;
  size_t window_start_ = 0;  // first token of the decoding window
  size_t settled_end_ = 0;   // tokens whose text is in text_
  std::string text_;         // the text of tokens_[0, settled_end_)
  size_t released_ = 0;      // bytes of text_ handed out
  bool stopped_ = false;
};

}  // namespace tfm::server

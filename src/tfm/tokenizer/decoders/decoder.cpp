#include "tfm/tokenizer/decoders/decoder.h"

#include <utility>

#include "tfm/tokenizer/json_fields.h"

namespace tfm::tokenizer {

std::unique_ptr<Decoder> make_decoder(const json::Value& v) {
  if (v.is_null()) return nullptr;
  return with_context("decoder", v, [&]() -> std::unique_ptr<Decoder> {
    const std::string& type = required(v, "type").as_string();
    if (type == "ByteLevel") return make_byte_level_decoder(v);
    if (type == "Metaspace") return make_metaspace_decoder(v);
    if (type == "Replace") return make_replace_decoder(v);
    if (type == "ByteFallback") return make_byte_fallback(v);
    if (type == "Fuse") return make_fuse(v);
    if (type == "Strip") return make_strip_decoder(v);
    if (type == "WordPiece") return make_word_piece_decoder(v);
    if (type == "BPEDecoder") return make_bpe_decoder(v);
    if (type == "CTC") return make_ctc(v);
    if (type == "Sequence") return make_decoder_sequence(v);
    throw_error("unknown decoder type '", type, "'");
  });
}

std::string clean_up_tokenization(std::string text, bool do_not_rule) {
  static const std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},   {" ?", "?"},   {" !", "!"},     {" ,", ","},     {" ' ", "'"},         {" n't", "n't"},
      {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}, {" do not", " don't"}};
  for (const auto& [from, to] : kRules) {
    if (from == " do not" && !do_not_rule) continue;
    text = replace_all(text, from, to);
  }
  return text;
}

std::string replace_all(const std::string& text, std::string_view from, std::string_view to) {
  if (from.empty()) return text;
  std::string out;
  size_t last = 0;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, last)) {
    out.append(text, last, at - last);
    out.append(to);
    last = at + from.size();
  }
  out.append(text, last, std::string::npos);
  return out;
}

}  // namespace tfm::tokenizer

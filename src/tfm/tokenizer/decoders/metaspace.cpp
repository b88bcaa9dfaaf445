// Metaspace: "▁" back to spaces; the first token's "▁" is the prepended one and is dropped.
#include "tfm/tokenizer/decoders/decoder.h"
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/pre_tokenizers/prepend_scheme.h"

namespace tfm::tokenizer {

namespace {

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool drop_first)
      : replacement_(std::move(replacement)), drop_first_(drop_first) {}

  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string_view with = i == 0 && drop_first_ ? "" : " ";
      std::string out;
      const std::string& t = tokens[i];
      size_t last = 0;
      for (size_t at = t.find(replacement_); at != std::string::npos; at = t.find(replacement_, last)) {
        out.append(t, last, at - last);
        out.append(with);
        last = at + replacement_.size();
      }
      out.append(t, last, std::string::npos);
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool drop_first_;
};

}  // namespace

std::unique_ptr<Decoder> make_metaspace_decoder(const json::Value& v) {
  return std::make_unique<MetaspaceDecoder>(string_or(v, "replacement", "\xE2\x96\x81"),
                                            parse_prepend_scheme(v) != PrependScheme::never);
}

}  // namespace tfm::tokenizer

#include "tfm/tokenizer/transformers_classes.h"

#include "tfm/tokenizer/classes/classes.h"
#include "tfm/tokenizer/json_fields.h"

namespace tfm::tokenizer {
namespace {

const std::vector<TokenizerClass>& all_classes() {
  static const std::vector<TokenizerClass> all = [] {
    std::vector<TokenizerClass> v;
    classes::add_decoder_bpe_classes(v);
    classes::add_bert_like_classes(v);
    classes::add_unigram_a_classes(v);
    classes::add_unigram_b_classes(v);
    classes::add_encoder_bpe_classes(v);
    return v;
  }();
  return all;
}

}  // namespace

std::optional<std::string> special_token_string(const json::Value& v) {
  if (v.is_null()) return std::nullopt;
  if (v.is_object()) return required(v, "content").as_string();
  return v.as_string();
}

const TokenizerClass* find_tokenizer_class(std::string_view name) {
  for (const TokenizerClass& c : all_classes())
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace tfm::tokenizer

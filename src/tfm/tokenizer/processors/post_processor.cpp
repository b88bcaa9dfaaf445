#include "tfm/tokenizer/processors/post_processor.h"

#include "tfm/tokenizer/json_fields.h"

namespace tfm::tokenizer {

std::unique_ptr<PostProcessor> make_post_processor(const json::Value& v) {
  if (v.is_null()) return nullptr;
  return with_context("post_processor", v, [&]() -> std::unique_ptr<PostProcessor> {
    const std::string& type = required(v, "type").as_string();
    if (type == "TemplateProcessing") return make_template_processing(v);
    if (type == "ByteLevel") return make_byte_level_processor(v);
    if (type == "RobertaProcessing" || type == "BertProcessing") return make_roberta_processing(v);
    if (type == "Sequence") return make_post_processor_sequence(v);
    throw_error("unknown post_processor type '", type, "'");
  });
}

}  // namespace tfm::tokenizer

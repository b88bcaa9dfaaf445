// Post-processors: add the special tokens around an encoded sequence (when add_special_tokens is on).
// make_post_processor picks one by the "type" field of tokenizer.json.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tfm/io/json.h"

namespace tfm::tokenizer {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // The final ids of one sequence whose model ids are `ids`.
  virtual void process(std::vector<int32_t>& ids) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const json::Value& v);  // nullptr for null

// The components, one per file.
std::unique_ptr<PostProcessor> make_template_processing(const json::Value& v);
std::unique_ptr<PostProcessor> make_byte_level_processor(const json::Value& v);
std::unique_ptr<PostProcessor> make_roberta_processing(const json::Value& v);  // also BertProcessing
std::unique_ptr<PostProcessor> make_post_processor_sequence(const json::Value& v);

}  // namespace tfm::tokenizer

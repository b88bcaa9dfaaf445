// Which tokenizer class Transformers' AutoTokenizer.from_pretrained picks for a folder (Transformers 5.17's
// rules): from config.json's model_type, tokenizer_config.json's tokenizer_class (or config.json's), and the
// name the folder was asked for. The class decides whether tokenizer.json's pipeline is used as it is.
#pragma once

#include <string>
#include <string_view>

#include "tfm/io/json.h"

namespace tfm::tokenizer {

enum class ClassKind {
  file,     // TokenizersBackend and classes without their own __init__: tokenizer.json as it is
  rebuild,  // the class's __init__ builds the pipeline around the file's vocabulary (transformers_classes.h)
  python,   // a Python tokenizer that reads vocabulary files of its own, not tokenizer.json
};

struct ChosenClass {
  std::string name;  // the class itself ("LlamaTokenizer" for "LlamaTokenizerFast")
  ClassKind kind;
};

// model_config: config.json (null when the folder has none). name_or_path: what from_pretrained was given
// (a Hub id or a path), which a few Hub ids are matched against. Throws for a tokenizer that only custom
// Python code (auto_map) provides.
ChosenClass choose_tokenizer_class(const json::Value& model_config, const json::Value& tokenizer_config,
                                   std::string_view name_or_path);

}  // namespace tfm::tokenizer

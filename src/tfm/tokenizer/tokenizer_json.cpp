#include "tfm/tokenizer/tokenizer_json.h"

#include "tfm/core/error.h"
#include "tfm/io/file.h"
#include "tfm/io/json_reader.h"

namespace tfm::tokenizer {

TokenizerJson TokenizerJson::parse(std::string text) {
  TokenizerJson tj;
  tj.text = std::make_unique<const std::string>(std::move(text));
  json::Reader r(*tj.text);
  if (r.peek() != json::Value::Type::object) {  // the loader names the wrong type
    tj.tree = r.value();
    r.end();
    return tj;
  }
  tj.tree = json::Object{};
  r.begin_object();
  for (std::string_view key; r.next_member(key);) {
    std::string name(key);
    if (name != "model" || r.peek() != json::Value::Type::object) {
      tj.tree.set(std::move(name), r.value());  // a repeated key keeps its last value, as Python's json
      continue;
    }
    json::Value model = json::Object{};
    tj.vocab = tj.merges = {};
    r.begin_object();
    for (std::string_view field; r.next_member(field);) {
      if (field == "vocab" || field == "merges") {
        std::string_view& part = field == "vocab" ? tj.vocab : tj.merges;
        part = r.raw();
        if (part == "null") part = {};
      } else {
        std::string owned(field);
        model.set(std::move(owned), r.value());
      }
    }
    tj.tree.set("model", std::move(model));
  }
  r.end();
  return tj;
}

TokenizerJson TokenizerJson::read_file(const std::string& path) {
  std::string text = io::read_file(path);
  try {
    return parse(std::move(text));
  } catch (const Error& e) {
    throw_error(path, ": ", e.what());
  }
}

}  // namespace tfm::tokenizer

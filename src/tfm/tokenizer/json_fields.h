// Reading the fields of a tokenizer.json component, with errors that name the field and its component.
#pragma once

#include <string>
#include <string_view>

#include "tfm/core/error.h"
#include "tfm/io/json.h"

namespace tfm::tokenizer {

// The value of `key`, or `fallback` when the key is absent or null (serde's #[serde(default)]).
inline std::string string_or(const json::Value& v, std::string_view key, std::string_view fallback) {
  const json::Value* f = v.find(key);
  return f && !f->is_null() ? f->as_string() : std::string(fallback);
}
inline bool bool_or(const json::Value& v, std::string_view key, bool fallback) {
  const json::Value* f = v.find(key);
  return f && !f->is_null() ? f->as_bool() : fallback;
}
inline int64_t int_or(const json::Value& v, std::string_view key, int64_t fallback) {
  const json::Value* f = v.find(key);
  return f && !f->is_null() ? f->as_int() : fallback;
}
// A field that must be there; the error names it.
inline const json::Value& required(const json::Value& v, std::string_view key) {
  const json::Value* f = v.find(key);
  check(f != nullptr && !f->is_null(), "missing field '", key, "'");
  return *f;
}

// Runs make(v) and prefixes any error with where it happened: "normalizer Replace: missing field 'content'".
template <typename Make>
auto with_context(std::string_view stage, const json::Value& v, Make make) {
  std::string type = "?";
  if (const json::Value* t = v.find("type"); t && t->is_string()) type = t->as_string();
  try {
    return make();
  } catch (const Error& e) {
    throw_error(stage, " ", type, ": ", e.what());
  }
}

}  // namespace tfm::tokenizer

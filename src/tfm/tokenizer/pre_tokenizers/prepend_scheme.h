// Where Metaspace puts its leading "▁"; shared by the Metaspace pre-tokenizer and decoder.
#pragma once

#include "tfm/io/json.h"

namespace tfm::tokenizer {

enum class PrependScheme { always, first, never };
// From "prepend_scheme", or from the older "add_prefix_space" flag.
PrependScheme parse_prepend_scheme(const json::Value& v);

}  // namespace tfm::tokenizer

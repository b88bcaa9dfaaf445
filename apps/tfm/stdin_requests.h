// The JSON that the tokenize, detokenize and chat-template commands read on standard input, parsed and
// checked for shape on its own, before any model folder is read: a fuzz target (tests/fuzz) reaches it
// directly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/tokenizer/chat_template.h"

namespace tfm::cli {

// tokenize: a JSON array of strings.
std::vector<std::string> parse_texts_request(std::string_view text);
// detokenize: a JSON array of lists of integer ids.
std::vector<std::vector<int64_t>> parse_id_lists_request(std::string_view text);
// chat-template: one object with "messages" (required) and apply_chat_template's keyword arguments.
ChatTemplateInputs parse_chat_template_request(std::string_view text);

}  // namespace tfm::cli

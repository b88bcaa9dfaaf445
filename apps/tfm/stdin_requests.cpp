#include "stdin_requests.h"

#include "tfm/core/error.h"
#include "tfm/io/json.h"

namespace tfm::cli {

std::vector<std::string> parse_texts_request(std::string_view text) {
  const json::Value input = json::parse(text);
  check(input.is_array(), "stdin must hold a JSON array of strings");
  std::vector<std::string> texts;
  for (size_t i = 0; i < input.size(); ++i) {
    check(input[i].is_string(), "stdin element ", i, " must be a string, found ",
          json::Value::type_name(input[i].type()));
    texts.push_back(input[i].as_string());
  }
  return texts;
}

std::vector<std::vector<int64_t>> parse_id_lists_request(std::string_view text) {
  const json::Value input = json::parse(text);
  check(input.is_array(), "stdin must hold a JSON array of id lists");
  std::vector<std::vector<int64_t>> lists;
  for (size_t i = 0; i < input.size(); ++i) {
    check(input[i].is_array(), "stdin element ", i, " must be a list of ids");
    std::vector<int64_t>& ids = lists.emplace_back();
    for (const json::Value& id : input[i].as_array()) {
      check(id.is_int(), "stdin element ", i, " holds a non-integer id ", json::dump(id));
      ids.push_back(id.as_int());
    }
  }
  return lists;
}

ChatTemplateInputs parse_chat_template_request(std::string_view text) {
  const json::Value request = json::parse(text);
  check(request.is_object(), "standard input must hold one JSON object");
  ChatTemplateInputs inputs;
  bool has_messages = false;
  for (const auto& [key, value] : request.as_object()) {
    if (key == "messages") {
      inputs.messages = value;
      has_messages = true;
    } else if (key == "add_generation_prompt") {
      check(value.is_bool(), "add_generation_prompt must be true or false");
      inputs.add_generation_prompt = value.as_bool();
    } else if (key == "tools" || key == "documents") {
      if (!value.is_null()) (key == "tools" ? inputs.tools : inputs.documents) = value;
    } else if (key == "continue_final_message") {
      check(value.is_bool() || value.is_string(),
            "continue_final_message must be true, false or a field name");
      if (value.is_string())
        inputs.continue_final_message = value.as_string();
      else if (value.as_bool())
        inputs.continue_final_message = "content";
    } else if (key == "chat_template") {
      check(value.is_string(), "chat_template must be a template name or source");
      inputs.chat_template = value.as_string();
    } else {
      inputs.variables.emplace_back(key, value);
    }
  }
  check(has_messages, "the input needs \"messages\"");
  return inputs;
}

}  // namespace tfm::cli

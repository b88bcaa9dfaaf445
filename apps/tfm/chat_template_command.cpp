#include <iostream>

#include "commands.h"
#include "model_args.h"
#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/tokenizer/chat_template.h"

namespace tfm::cli {
namespace {

int run(Args& args) {
  const ModelArgs m = read_model_args(args, ModelUse::tokenizer);
  args.finish();

  const json::Value config = read_tokenizer_config(m.dir);
  const ChatTemplates templates = load_chat_templates(m.dir, config);

  const json::Value request = json::parse(read_stdin());
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
  std::cout << apply_chat_template(templates, config, inputs);
  std::cout.flush();
  return 0;
}

}  // namespace

const Command kChatTemplateCommand{
    "chat-template", "render a model's chat template as Transformers' apply_chat_template does",
    "usage: tfm chat-template [--model ID|DIR] < request.json\n\n"
    "Reads one JSON object on standard input: \"messages\" (required), \"add_generation_prompt\"\n"
    "(default false), \"tools\", \"documents\", \"chat_template\" (a template name or source),\n"
    "\"continue_final_message\" (true or a field name), and any other keys, which the template sees as\n"
    "variables (e.g. \"enable_thinking\"). Writes the rendered text to standard output exactly.\n"
    "The model needs tokenizer_config.json and/or chat_template.jinja (additional_chat_templates/ too).\n"
    "\noptions:\n" +
        std::string(kModelHelp),
    run};

}  // namespace tfm::cli

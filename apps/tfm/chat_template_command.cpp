#include <iostream>

#include "commands.h"
#include "model_args.h"
#include "stdin_requests.h"
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

  const ChatTemplateInputs inputs = parse_chat_template_request(read_stdin());
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

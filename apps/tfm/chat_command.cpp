#include <algorithm>
#include <iostream>
#include <string>

#include "commands.h"
#include "generation_args.h"
#include "model_args.h"
#include "tfm/core/error.h"
#include "tfm/generate/streamer.h"
#include "tfm/tokenizer/chat_template.h"

namespace tfm::cli {
namespace {

constexpr const char* kCommandsHelp = "/reset starts over, /exit ends";

int run(Args& args) {
  ModelArgs m = read_model_args(args);
  const auto system = args.get("system");
  json::Object kwargs = read_generation_kwargs(args);
  args.finish();
  if (std::none_of(kwargs.begin(), kwargs.end(),
                   [](const auto& kv) { return kv.first == "max_new_tokens"; })) {
    kwargs.emplace_back("max_new_tokens", 256);
  }

  AutoModelForCausalLM model = AutoModelForCausalLM::from_pretrained(m.dir, m.options);
  check_generation_kwargs(model, kwargs);
  const tokenizer::Tokenizer tok = tokenizer::AutoTokenizer::from_pretrained(m.dir, m.id);
  const ChatTemplates templates = load_chat_templates(m.dir, tok.config());
  check(!templates.empty(), m.id, " has no chat template");
  auto decode = [&](const std::vector<int64_t>& t) { return tok.decode(t, /*skip_special_tokens=*/true); };

  json::Array messages;
  auto reset = [&] {
    messages.clear();
    if (system) messages.push_back(json::Object{{"role", "system"}, {"content", *system}});
  };
  reset();
  if (!args.quiet())
    std::cerr << "tfm chat with " << m.id << " on " << model.device().str() << ": " << kCommandsHelp << "\n";
  std::string line;
  while (std::cout << "> " << std::flush, std::getline(std::cin, line)) {
    if (line == "/exit") break;
    if (line == "/reset") {
      reset();
      std::cout << "(conversation reset)\n";
      continue;
    }
    // A line such as "/help" or "/quit" is a command misspelt, not a message for the model.
    if (line.starts_with('/')) {
      std::cout << "(unknown command " << line.substr(0, line.find(' ')) << ": " << kCommandsHelp
                << "; start a message with a space to send it as it is)\n";
      continue;
    }
    if (line.empty()) continue;
    messages.push_back(json::Object{{"role", "user"}, {"content", line}});
    ChatTemplateInputs inputs;
    inputs.messages = messages;
    inputs.add_generation_prompt = true;
    const std::string text = apply_chat_template(templates, tok.config(), inputs);
    std::string answer;
    TextStreamer streamer(
        decode,
        [&](std::string_view piece, bool) {
          answer += piece;
          std::cout << piece << std::flush;
        },
        /*skip_prompt=*/true);
    GenerateCallbacks callbacks;
    callbacks.decode = decode;
    callbacks.on_token = [&](size_t, int64_t token) { streamer.put(std::vector<int64_t>{token}); };
    generate_naming_flags(model, {tok.encode(text, /*add_special_tokens=*/false)}, kwargs, callbacks);
    streamer.end();
    std::cout << "\n";
    messages.push_back(json::Object{{"role", "assistant"}, {"content", answer}});
  }
  return 0;
}

}  // namespace

const Command kChatCommand{"chat", "chat with a model in the terminal",
                           "usage: tfm chat [--model ID|DIR] [--system TEXT] [options]\n\n"
                           "A multi-turn chat through the model's chat template, answers streamed as they "
                           "come. Type /reset to start\n"
                           "over and /exit (or end of input) to leave.\n\noptions:\n"
                           "  --system TEXT               a system message that opens every conversation\n"
                           "  (--max-new-tokens: the longest answer, 256 by default)\n" +
                               std::string(kGenerationHelp) + kModelHelp + kRunHelp,
                           run};

}  // namespace tfm::cli

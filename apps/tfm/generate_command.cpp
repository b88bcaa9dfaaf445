#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <utility>

#include "commands.h"
#include "generation_args.h"
#include "model_args.h"
#include "tfm/core/error.h"
#include "tfm/generate/streamer.h"
#include "tfm/io/json.h"
#include "tfm/tokenizer/chat_template.h"

namespace tfm::cli {
namespace {

void print_timing(std::ostream& err, double load_seconds, const GenerateOutput& out) {
  const int64_t decoded = out.generated_tokens - static_cast<int64_t>(out.tokens.size());
  err << std::fixed << std::setprecision(2) << "load " << load_seconds << " s, prompt "
      << static_cast<double>(out.prompt_tokens) / out.prefill_seconds << " tokens/s, generation "
      << (decoded > 0 ? static_cast<double>(decoded) / out.decode_seconds : 0.0) << " tokens/s\n";
}

int run(Args& args) {
  ModelArgs m = read_model_args(args);
  const auto ids_text = args.get("ids");
  const auto prompt = args.get("prompt");
  const bool chat = args.flag("chat");
  const auto system = args.get("system");
  const bool as_json = args.flag("json");
  const json::Object kwargs = read_generation_kwargs(args);
  args.finish();
  check(ids_text.has_value() != prompt.has_value(), "give either --prompt or --ids");
  check(!(chat || system) || prompt, "--chat and --system need --prompt");

  const auto load_start = std::chrono::steady_clock::now();
  AutoModelForCausalLM model = AutoModelForCausalLM::from_pretrained(m.dir, m.options);
  check_generation_kwargs(model, kwargs);
  // Text needs the tokenizer; --ids works with model folders that have none.
  std::optional<tokenizer::Tokenizer> tok;
  if (prompt || std::filesystem::exists(std::filesystem::path(m.dir) / "tokenizer.json")) {
    tok = tokenizer::AutoTokenizer::from_pretrained(m.dir, m.id);
  }
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

  std::vector<int64_t> ids;
  if (ids_text) {
    ids = parse_id_list(*ids_text);
  } else if (chat || system) {
    json::Array messages;
    if (system) messages.push_back(json::Object{{"role", "system"}, {"content", *system}});
    messages.push_back(json::Object{{"role", "user"}, {"content", *prompt}});
    ChatTemplateInputs inputs;
    inputs.messages = std::move(messages);
    inputs.add_generation_prompt = true;
    const std::string text =
        apply_chat_template(load_chat_templates(m.dir, tok->config()), tok->config(), inputs);
    ids = tok->encode(text, /*add_special_tokens=*/false);
  } else {
    ids = tok->encode(*prompt);
  }

  auto decode = [&](const std::vector<int64_t>& t) { return tok->decode(t, /*skip_special_tokens=*/true); };
  GenerateCallbacks callbacks;
  if (tok) callbacks.decode = decode;
  std::optional<TextStreamer> streamer;
  // The prompt is echoed with the first new token: whatever generate() rejects, it does before that, so an
  // error comes alone.
  bool echo_prompt = prompt && !chat && !system;
  if (!as_json && tok) {
    streamer.emplace(
        decode, [](std::string_view text, bool) { std::cout << text << std::flush; }, /*skip_prompt=*/true);
    streamer->put(ids);
    callbacks.on_token = [&](size_t, int64_t token) {
      if (std::exchange(echo_prompt, false)) std::cout << *prompt;
      streamer->put(std::vector<int64_t>{token});
    };
  } else if (!as_json) {
    callbacks.on_token = [](size_t, int64_t token) { std::cout << token << " " << std::flush; };
  }
  const GenerateOutput out = generate_naming_flags(model, {ids}, kwargs, callbacks);
  if (streamer) streamer->end();

  if (as_json) {
    json::Array generated;
    for (int64_t id : out.tokens[0]) generated.push_back(id);
    json::Value result;
    result.set("ids", std::move(generated));
    if (tok) result.set("text", decode(out.tokens[0]));
    result.set("prompt_tokens", out.prompt_tokens);
    result.set("load_seconds", load_seconds);
    result.set("prefill_seconds", out.prefill_seconds);
    result.set("decode_seconds", out.decode_seconds);
    std::cout << json::dump(result) << "\n";
  } else {
    std::cout << "\n";
  }
  if (!args.quiet()) print_timing(std::cerr, load_seconds, out);
  return 0;
}

}  // namespace

const Command kGenerateCommand{
    "generate", "generate text from a prompt (streamed as it comes)",
    "usage: tfm generate [--model ID|DIR] (--prompt TEXT [--chat] [--system TEXT] | --ids 1,2,3) "
    "[options]\n\n"
    "Generates a continuation, greedy unless generation_config.json or the options say otherwise; EOS from\n"
    "generation_config.json stops it. Text streams to stdout as it is generated; timing goes to stderr.\n"
    "--json prints one object instead: {\"ids\": the generated ids, \"text\": their text, "
    "timing}.\n\noptions:\n"
    "  --prompt TEXT               the prompt, tokenized as tokenizer(TEXT) does\n"
    "  --chat                      apply the model's chat template to the prompt (a user message)\n"
    "  --system TEXT               a system message before the prompt (implies --chat)\n"
    "  --ids I,J,K                 the prompt as token ids\n"
    "  --json                      print one JSON object\n" +
        std::string(kGenerationHelp) + kModelHelp + kRunHelp,
    run};

}  // namespace tfm::cli

#include <chrono>
#include <iomanip>
#include <iostream>

#include "commands.h"
#include "model_args.h"
#include "tfm/core/error.h"
#include "tfm/generate/generate.h"
#include "tfm/io/json.h"

namespace tfm::cli {
namespace {

// The sampling and length options, as generate(**kwargs) names them.
json::Object read_generation_kwargs(Args& args) {
  json::Value kwargs = json::Object{};
  if (auto n = args.get_int("max-new-tokens")) kwargs.set("max_new_tokens", *n);
  if (args.flag("do-sample")) kwargs.set("do_sample", true);
  if (args.flag("greedy")) kwargs.set("do_sample", false);
  if (auto t = args.get_double("temperature")) kwargs.set("temperature", *t);
  if (auto k = args.get_int("top-k")) kwargs.set("top_k", *k);
  if (auto p = args.get_double("top-p")) kwargs.set("top_p", *p);
  if (auto p = args.get_double("min-p")) kwargs.set("min_p", *p);
  if (auto r = args.get_double("repetition-penalty")) kwargs.set("repetition_penalty", *r);
  if (auto s = args.get_int("seed")) kwargs.set("seed", *s);
  return std::move(kwargs.as_object());
}

void print_timing(std::ostream& err, double load_seconds, const GenerateOutput& out) {
  const int64_t decoded = out.generated_tokens - static_cast<int64_t>(out.tokens.size());
  err << std::fixed << std::setprecision(2) << "load " << load_seconds << " s, prompt "
      << static_cast<double>(out.prompt_tokens) / out.prefill_seconds << " tokens/s, generation "
      << (decoded > 0 ? static_cast<double>(decoded) / out.decode_seconds : 0.0) << " tokens/s\n";
}

int run(Args& args) {
  ModelArgs m = read_model_args(args);
  const auto ids_text = args.get("ids");
  const bool as_json = args.flag("json");
  const json::Object kwargs = read_generation_kwargs(args);
  args.finish();
  check(ids_text.has_value(), "--ids is required");
  const std::vector<int64_t> ids = parse_id_list(*ids_text);

  const auto load_start = std::chrono::steady_clock::now();
  CausalLM model = CausalLM::from_pretrained(m.dir, m.load);
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const GenerationConfig generation_config = load_generation_config(m.dir, model.config());
  GenerateCallbacks callbacks;
  if (!as_json) callbacks.on_token = [](size_t, int64_t token) { std::cout << token << " " << std::flush; };
  const GenerateOutput out = generate(model, {ids}, generation_config, kwargs, callbacks);
  for (const std::string& w : out.warnings) std::cerr << "warning: " << w << "\n";
  print_timing(std::cerr, load_seconds, out);
  if (as_json) {
    json::Array generated;
    for (int64_t id : out.tokens[0]) generated.push_back(id);
    json::Value result;
    result.set("ids", std::move(generated));
    std::cout << json::dump(result) << "\n";
  } else {
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

const Command kGenerateCommand{
    "generate", "generate a continuation of a prompt",
    "usage: tfm generate --model DIR --ids 1,2,3 [--max-new-tokens N] [--device D] [--dtype D] [--json]\n\n"
    "Generates from the prompt ids, greedy unless generation_config.json or the options say otherwise; EOS from\n"
    "generation_config.json stops it. --json prints {\"ids\": the generated ids}.\n\noptions:\n"
    "  --ids I,J,K                 the prompt token ids\n"
    "  --max-new-tokens N          how many tokens to generate at most\n"
    "  --do-sample, --greedy       sample, or pick the most likely token\n"
    "  --temperature T  --top-k K  --top-p P  --min-p P  --repetition-penalty R  --seed S\n"
    "  --json                      print one JSON object\n" +
        std::string(kModelOptionsHelp),
    run};

}  // namespace tfm::cli

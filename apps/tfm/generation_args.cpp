#include "generation_args.h"

#include <algorithm>
#include <string_view>

#include "tfm/core/error.h"
#include "tfm/generation/logits_process.h"

namespace tfm::cli {
namespace {

struct Option {
  std::string_view flag;
  std::string_view kwarg;
  bool integer;
  std::string_view in_messages;  // the name Transformers' messages give it, where not the kwarg's
};

constexpr Option kOptions[] = {
    {"max-new-tokens", "max_new_tokens", true, ""},
    {"temperature", "temperature", false, ""},
    {"top-k", "top_k", true, ""},
    {"top-p", "top_p", false, ""},
    {"min-p", "min_p", false, ""},
    {"repetition-penalty", "repetition_penalty", false, "penalty"},  // RepetitionPenaltyLogitsProcessor's
    {"seed", "seed", true, ""},
};

// Runs f, rewriting "`max_new_tokens`" as "--max-new-tokens" in its error for every option given as a flag.
template <typename F>
auto naming_flags(const json::Object& kwargs, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    std::string message = e.what();
    for (const Option& o : kOptions) {
      if (std::none_of(kwargs.begin(), kwargs.end(), [&](const auto& kv) { return kv.first == o.kwarg; }))
        continue;
      const std::string python = "`" + std::string(o.in_messages.empty() ? o.kwarg : o.in_messages) + "`";
      const std::string flag = "--" + std::string(o.flag);
      for (size_t at = message.find(python); at != std::string::npos;
           at = message.find(python, at + flag.size())) {
        message.replace(at, python.size(), flag);
      }
    }
    throw Error(message);
  }
}

}  // namespace

const char* const kGenerationHelp =
    "  --max-new-tokens N          how many tokens to generate at most\n"
    "  --do-sample, --greedy       sample, or pick the most likely token\n"
    "  --temperature T  --top-k K  --top-p P  --min-p P  --repetition-penalty R  --seed S\n";

json::Object read_generation_kwargs(Args& args) {
  json::Value kwargs = json::Object{};
  for (const Option& o : kOptions) {
    if (o.integer) {
      if (const auto v = args.get_int(o.flag)) kwargs.set(std::string(o.kwarg), *v);
    } else if (const auto v = args.get_double(o.flag)) {
      kwargs.set(std::string(o.kwarg), *v);
    }
  }
  if (args.flag("do-sample")) kwargs.set("do_sample", true);
  if (args.flag("greedy")) kwargs.set("do_sample", false);
  return std::move(kwargs.as_object());
}

void check_generation_kwargs(const AutoModelForCausalLM& model, const json::Object& kwargs) {
  naming_flags(kwargs, [&] {
    const PreparedGenerationConfig prepared = prepare_generation_config(model.generation_config(), kwargs);
    build_logits_processors(prepared.config, /*prompt_length=*/1, LengthLimits{});
  });
}

GenerateOutput generate_naming_flags(AutoModelForCausalLM& model,
                                     const std::vector<std::vector<int64_t>>& ids, const json::Object& kwargs,
                                     const GenerateCallbacks& callbacks) {
  return naming_flags(kwargs, [&] { return model.generate(ids, kwargs, callbacks); });
}

}  // namespace tfm::cli

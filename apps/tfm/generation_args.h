// The generation options of `tfm generate` and `tfm chat` (--max-new-tokens, --do-sample, --temperature,
// ...), read as generate(**kwargs) names them. Transformers' messages name those parameters; a CLI user typed
// flags, so the errors below name the flags.
#pragma once

#include "cli.h"
#include "tfm/generate/auto.h"

namespace tfm::cli {

json::Object read_generation_kwargs(Args& args);

// Checks the options against the model's generation_config.json as generate() will, so that a bad value is
// an error before anything is printed.
void check_generation_kwargs(const AutoModelForCausalLM& model, const json::Object& kwargs);

GenerateOutput generate_naming_flags(AutoModelForCausalLM& model,
                                     const std::vector<std::vector<int64_t>>& ids, const json::Object& kwargs,
                                     const GenerateCallbacks& callbacks);

// The usage lines of the options.
extern const char* const kGenerationHelp;

}  // namespace tfm::cli

// The options every model-running subcommand shares: --model, --device, --dtype, --attn-implementation.
#pragma once

#include <string>

#include "cli.h"
#include "tfm/model/causal_lm.h"

namespace tfm::cli {

struct ModelArgs {
  std::string dir;  // the resolved local model folder
  LoadOptions load;
};

// Reads the shared options. Without --model the embedded default model is used.
ModelArgs read_model_args(Args& args);

// The usage lines of the shared options, for --help texts.
extern const char* const kModelOptionsHelp;

}  // namespace tfm::cli

// The options every model-running subcommand shares: --model, --revision, --device, --dtype,
// --attn-implementation.
#pragma once

#include <string>

#include "cli.h"
#include "tfm/generate/auto.h"

namespace tfm::cli {

struct ModelArgs {
  std::string id;   // as given (a folder or a Hub id), or the embedded default
  std::string dir;  // the local folder: the id itself or its Hub snapshot
  PretrainedOptions options;
};

// Reads the shared options and resolves the model folder (downloading a Hub id). Without --model the embedded
// default model is used.
ModelArgs read_model_args(Args& args);

// The demo model shipped with tfm, found beside the executable (build tree) or under its install prefix.
std::string default_model_dir();

// The usage lines of the shared options, for --help texts.
extern const char* const kModelOptionsHelp;

}  // namespace tfm::cli

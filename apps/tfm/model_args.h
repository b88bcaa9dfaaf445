// The model every command works on, named the same way everywhere: --model ID|DIR (default: the demo model
// shipped with tfm) and --revision; the commands that run the model also read --device, --dtype,
// --attn-implementation, --use-kernels and --kernels.
#pragma once

#include <string>

#include "cli.h"
#include "tfm/generate/auto.h"

namespace tfm::cli {

enum class ModelUse {
  run,       // the weights are loaded: the options that place and run them are read too
  tokenizer,  // only the tokenizer files and chat templates are needed (a Hub id downloads no weights)
  train       // the weights are loaded where and how the Trainer decides (no placement options)
};

struct ModelArgs {
  std::string id;   // as given (a folder or a Hub id), or the embedded default
  std::string dir;  // the local folder: the id itself or its Hub snapshot
  PretrainedOptions options;
};

// Reads the options for `use` and resolves the model folder, downloading a Hub id.
ModelArgs read_model_args(Args& args, ModelUse use = ModelUse::run);

// The demo model shipped with tfm, found beside the executable (build tree) or under its install prefix.
std::string default_model_dir();

// The usage lines of the options, for --help texts: --model and --revision, then those that run the model.
extern const char* const kModelHelp;
extern const char* const kRunHelp;

}  // namespace tfm::cli

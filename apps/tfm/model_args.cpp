#include "model_args.h"

#include "tfm/core/error.h"

namespace tfm::cli {

const char* const kModelOptionsHelp =
    "  --model DIR                 model folder as the Hub ships it\n"
    "  --device D                  cpu, cuda, cuda:N, xpu, xpu:N or auto (default: auto)\n"
    "  --dtype D                   auto, float32, bfloat16 or float16 (default: auto)\n"
    "  --attn-implementation A     eager or sdpa (default: sdpa)\n";

ModelArgs read_model_args(Args& args) {
  ModelArgs m;
  const auto model = args.get("model");
  check(model.has_value(), "--model is required");
  m.dir = *model;
  m.load.device = args.get_or("device", "auto");
  m.load.dtype = args.get_or("dtype", "auto");
  m.load.attn_implementation = args.get_or("attn-implementation", "sdpa");
  return m;
}

}  // namespace tfm::cli

#include "model_args.h"

#include <filesystem>

#include "tfm/core/error.h"

namespace tfm::cli {

const char* const kModelHelp =
    "  --model ID|DIR              a model folder as the Hub ships it, or a Hub id such as Qwen/Qwen3-0.6B\n"
    "                              (default: the demo model shipped with tfm)\n"
    "  --revision R                branch, tag or commit of a Hub id (default: main)\n";

const char* const kRunHelp =
    "  --device D                  cpu, cuda, cuda:N, xpu, xpu:N or auto (default: auto)\n"
    "  --dtype D                   auto, float32, bfloat16 or float16 (default: auto)\n"
    "  --attn-implementation A     eager, sdpa or flash_attention_2 (default: sdpa); flash_attention_3 on "
    "CUDA\n"
    "                              devices of compute capability 9.0 or more\n"
    "  --use-kernels               run each layer kind's kernel variant of the built-in mapping (`tfm "
    "kernels`)\n"
    "  --kernels JSON|FILE         a KernelConfig: layer kind -> variant, per device and mode, e.g.\n"
    "                              '{\"RMSNorm\": \"fused\", \"Linear\": {\"cpu\": \"reference\"}}' "
    "(implies --use-kernels)\n"
    "  --adapter DIR               a PEFT LoRA adapter folder (adapter_config.json, adapter_model.safetensors)\n";

std::string default_model_dir() {
  namespace fs = std::filesystem;
  const fs::path exe_dir = fs::read_symlink("/proc/self/exe").parent_path();
  for (const fs::path& candidate :
       {exe_dir / "models" / "demo", exe_dir / ".." / "share" / "tfm" / "models" / "demo"}) {
    if (fs::exists(candidate / "config.json")) return fs::canonical(candidate).string();
  }
  throw_error("no --model given and the default model is not installed beside ", exe_dir.string(),
              " (looked in models/demo and ../share/tfm/models/demo)");
}

ModelArgs read_model_args(Args& args, ModelUse use) {
  ModelArgs m;
  const auto model = args.get("model");
  m.options.revision = args.get_or("revision", "main");
  if (use == ModelUse::run) {
    m.options.device_map = args.get_or("device", "auto");
    m.options.dtype = args.get_or("dtype", "auto");
    m.options.attn_implementation = args.get_or("attn-implementation", "sdpa");
    m.options.use_kernels = args.flag("use-kernels");
    if (const auto kernels = args.get("kernels")) m.options.kernel_config = KernelConfig::parse(*kernels);
    m.options.adapter = args.get_or("adapter", "");
  }
  m.id = model ? *model : default_model_dir();
  m.dir = resolve_pretrained(m.id, m.options.revision, /*weights=*/use != ModelUse::tokenizer);
  return m;
}

}  // namespace tfm::cli

#include <filesystem>
#include <iostream>

#include "commands.h"
#include "model_args.h"
#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/lora.h"
#include "tfm/model/weights.h"

namespace tfm::cli {
namespace {

namespace fs = std::filesystem;

int run(Args& args) {
  ModelArgs m = read_model_args(args);
  const auto output_dir = args.get("output-dir");
  args.finish();
  check(!m.options.adapter.empty(), "--adapter is required");
  check(output_dir.has_value(), "--output-dir is required");
  check(!fs::exists(*output_dir) || !fs::equivalent(*output_dir, m.dir),
        "--output-dir is the model folder itself; give a new folder");

  AutoModelForCausalLM model = AutoModelForCausalLM::from_pretrained(m.dir, m.options);
  merge_adapter(model.model());
  // One tensor per checkpoint name: the rows of a fused projection go back to the modules they came from.
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const Parameter& p : model.model().parameters()) {
    const auto parts = p.checkpoint_tensors(to_device(p.value, Device{}));
    tensors.insert(tensors.end(), parts.begin(), parts.end());
  }
  fs::create_directories(*output_dir);
  copy_model_files_but_weights(m.dir, *output_dir);
  save_safetensors((fs::path(*output_dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  std::cout << "merged " << m.options.adapter << " into " << m.id << ": " << *output_dir << "\n";
  return 0;
}

}  // namespace

const Command kMergeAdapterCommand{
    "merge-adapter", "fold a PEFT LoRA adapter into a model and write the merged model folder",
    "usage: tfm merge-adapter --model ID|DIR --adapter DIR --output-dir DIR [--dtype D]\n\n"
    "Loads the model with the adapter, merges it as PEFT's merge_and_unload does (W += scaling * B @ A) and\n"
    "writes a model folder that `tfm generate --model` loads: model.safetensors with the checkpoint's "
    "names,\n"
    "and the model folder's other files (config.json, generation_config.json, tokenizer files) "
    "copied.\n\noptions:\n"
    "  --output-dir DIR            the folder to write\n" +
        std::string(kModelHelp) + kRunHelp,
    run};

}  // namespace tfm::cli

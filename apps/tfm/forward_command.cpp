#include <iostream>

#include "commands.h"
#include "model_args.h"
#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/model/causal_lm.h"

namespace tfm::cli {
namespace {

int run(Args& args) {
  ModelArgs m = read_model_args(args);
  const auto ids_text = args.get("ids");
  const bool as_json = args.flag("json");
  args.finish();
  check(ids_text.has_value(), "--ids is required");
  const std::vector<int64_t> ids = parse_id_list(*ids_text);

  CausalLM model = std::move(AutoModelForCausalLM::from_pretrained(m.dir, m.options).model());
  for (int64_t id : ids) {
    check(id < model.config().vocab_size, "token id ", id, " is outside the vocabulary (size ",
          model.config().vocab_size, ")");
  }
  KVCache cache = model.make_cache(blocks_for(static_cast<int64_t>(ids.size()), CausalLM::kDefaultBlockSize));
  SequenceCache seq;
  BatchBuilder builder(cache);
  builder.add(seq, ids, Logits::all);
  const Tensor logits = model.forward(builder.finish(), cache);
  const int64_t T = logits.size(0), V = logits.size(1);

  json::Array argmax, last;
  for (int64_t t = 0; t < T; ++t) {
    const float* row = logits.data<float>() + t * V;
    argmax.push_back(static_cast<int64_t>(std::max_element(row, row + V) - row));
  }
  for (int64_t v = 0; v < V; ++v) last.push_back(static_cast<double>(logits.data<float>()[(T - 1) * V + v]));
  if (as_json) {
    json::Value out;
    out.set("argmax", std::move(argmax));
    out.set("last_logits", std::move(last));
    std::cout << json::dump(out) << "\n";
  } else {
    std::cout << "argmax: " << json::dump(json::Value(std::move(argmax))) << "\n";
  }
  return 0;
}

}  // namespace

const Command kForwardCommand{
    "forward", "run one forward pass and print the logits",
    "usage: tfm forward [--model ID|DIR] --ids 1,2,3 [--device D] [--dtype D] [--json]\n\n"
    "Runs the ids through the model once. --json prints {\"argmax\": the argmax id at every position,\n"
    "\"last_logits\": all logits of the last position}.\n\noptions:\n"
    "  --ids I,J,K                 the input token ids\n"
    "  --json                      print one JSON object\n" +
        std::string(kModelHelp) + kRunHelp,
    run};

}  // namespace tfm::cli

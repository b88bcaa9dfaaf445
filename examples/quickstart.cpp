// The Transformers guide's first example, line for line:
//
//   from transformers import AutoModelForCausalLM, AutoTokenizer
//   model = AutoModelForCausalLM.from_pretrained(model_id, dtype="auto", device_map="auto")
//   tokenizer = AutoTokenizer.from_pretrained(model_id)
//   model_inputs = tokenizer(["The old man said"], return_tensors="pt").to(model.device)
//   generated_ids = model.generate(**model_inputs, max_new_tokens=40)
//   print(tokenizer.batch_decode(generated_ids, skip_special_tokens=True)[0])
//
// usage: quickstart MODEL_ID_OR_DIR [PROMPT]
#include <iostream>

#include "tfm/generate/auto.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: quickstart MODEL_ID_OR_DIR [PROMPT]\n";
    return 2;
  }
  const std::string model_id = argv[1];
  const std::string prompt = argc > 2 ? argv[2] : "The old man said";
  try {
    auto model =
        tfm::AutoModelForCausalLM::from_pretrained(model_id, {.dtype = "auto", .device_map = "auto"});
    auto tokenizer = tfm::AutoTokenizer::from_pretrained(model_id);
    auto model_inputs = tokenizer.encode_batch({prompt});
    auto generated = model.generate(model_inputs, {{"max_new_tokens", 40}});
    // generate returns only the new tokens; the guide's output starts with the prompt.
    model_inputs[0].insert(model_inputs[0].end(), generated.tokens[0].begin(), generated.tokens[0].end());
    std::cout << tokenizer.decode(model_inputs[0], /*skip_special_tokens=*/true) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

// A chat template rendered as apply_chat_template renders it, over a fixed conversation: any source gives
// text or a tfm::Error, within the interpreter's limits.
#include <cstdint>
#include <string>

#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tfm::json::Value config = tfm::json::parse(
      R"({"bos_token": "<s>", "eos_token": "</s>", "pad_token": null,
          "additional_special_tokens": ["<tool>"]})");
  static const tfm::ChatTemplateInputs inputs = [] {
    tfm::ChatTemplateInputs in;
    in.messages = tfm::json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
      {"role": "assistant", "content": "",
       "tool_calls": [{"type": "function", "function": {"name": "weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "content": "{\"sky\": \"clear\"}"},
      {"role": "assistant", "content": "Clear."},
      {"role": "user", "content": "Thanks"}])");
    in.tools = tfm::json::parse(R"([{"type": "function", "function": {"name": "weather",
      "description": "Weather of a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
    in.add_generation_prompt = true;
    in.variables.emplace_back("enable_thinking", false);
    return in;
  }();
  try {
    tfm::render_chat_template(std::string(reinterpret_cast<const char*>(data), size), config, inputs);
  } catch (const tfm::Error&) {
  }
  return 0;
}

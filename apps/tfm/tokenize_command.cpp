// `tfm tokenize` and `tfm detokenize`: the tokenizer of a model folder over JSON on stdin, as
// tokenizer(s, add_special_tokens=...)["input_ids"] and tokenizer.decode(ids, skip_special_tokens=...).
#include <iostream>

#include "commands.h"
#include "stdin_requests.h"
#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/tokenizer/tokenizer.h"

namespace tfm::cli {
namespace {

std::string required_model(Args& args) {
  auto dir = args.get("model");
  check(dir.has_value(), "--model DIR is required");
  return *dir;
}

int tokenize(Args& args) {
  const std::string dir = required_model(args);
  const bool add_special = !args.flag("no-special-tokens");
  args.finish();
  const std::vector<std::string> texts = parse_texts_request(read_stdin());
  const auto tokenizer = tokenizer::AutoTokenizer::from_pretrained(dir);
  json::Array out;
  for (const auto& ids : tokenizer.encode_batch(texts, add_special)) {
    json::Array list;
    for (int64_t id : ids) list.emplace_back(id);
    out.emplace_back(std::move(list));
  }
  std::cout << json::dump(json::Value(std::move(out))) << "\n";
  return 0;
}

int detokenize(Args& args) {
  const std::string dir = required_model(args);
  const bool skip_special = args.flag("skip-special-tokens");
  args.finish();
  const std::vector<std::vector<int64_t>> id_lists = parse_id_lists_request(read_stdin());
  const auto tokenizer = tokenizer::AutoTokenizer::from_pretrained(dir);
  json::Array out;
  for (const auto& ids : id_lists) out.emplace_back(tokenizer.decode(ids, skip_special));
  std::cout << json::dump(json::Value(std::move(out))) << "\n";
  return 0;
}

}  // namespace

const Command kTokenizeCommand{
    "tokenize", "text to token ids with a model's tokenizer",
    "usage: tfm tokenize --model DIR [--no-special-tokens]\n\n"
    "Reads a JSON array of strings on stdin and prints a JSON array with the ids of\n"
    "each, as tokenizer(s)[\"input_ids\"] in Transformers. DIR needs tokenizer.json\n"
    "(and tokenizer_config.json when the model has one).\n",
    tokenize};

const Command kDetokenizeCommand{
    "detokenize", "token ids to text with a model's tokenizer",
    "usage: tfm detokenize --model DIR [--skip-special-tokens]\n\n"
    "Reads a JSON array of id lists on stdin and prints a JSON array of strings, as\n"
    "tokenizer.decode(ids) in Transformers.\n",
    detokenize};

}  // namespace tfm::cli

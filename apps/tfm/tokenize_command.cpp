// `tfm tokenize` and `tfm detokenize`: the tokenizer of a model over JSON on stdin, as
// tokenizer(s, add_special_tokens=...)["input_ids"] and tokenizer.decode(ids, skip_special_tokens=...).
#include <iostream>

#include "commands.h"
#include "model_args.h"
#include "tfm/core/error.h"
#include "tfm/core/logging.h"
#include "tfm/io/json.h"
#include "tfm/tokenizer/tokenizer.h"

namespace tfm::cli {
namespace {

int tokenize(Args& args) {
  const ModelArgs m = read_model_args(args, ModelUse::tokenizer);
  const bool add_special = !args.flag("no-special-tokens");
  args.finish();
  const json::Value input = json::parse(read_stdin());
  check(input.is_array(), "stdin must hold a JSON array of strings");
  std::vector<std::string> texts;
  for (size_t i = 0; i < input.size(); ++i) {
    check(input[i].is_string(), "stdin element ", i, " must be a string, found ",
          json::Value::type_name(input[i].type()));
    texts.push_back(input[i].as_string());
  }
  const auto tokenizer = tokenizer::AutoTokenizer::from_pretrained(m.dir, m.id);
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
  const ModelArgs m = read_model_args(args, ModelUse::tokenizer);
  const bool skip_special = args.flag("skip-special-tokens");
  args.finish();
  const json::Value input = json::parse(read_stdin());
  check(input.is_array(), "stdin must hold a JSON array of id lists");
  const auto tokenizer = tokenizer::AutoTokenizer::from_pretrained(m.dir, m.id);
  json::Array out;
  for (size_t i = 0; i < input.size(); ++i) {
    check(input[i].is_array(), "stdin element ", i, " must be a list of ids");
    std::vector<int64_t> ids;
    std::string unknown;
    for (const json::Value& id : input[i].as_array()) {
      check(id.is_int(), "stdin element ", i, " holds a non-integer id ", json::dump(id));
      ids.push_back(id.as_int());
      if (id.as_int() >= 0 && !tokenizer.id_to_token(id.as_int())) {
        unknown += (unknown.empty() ? "" : ", ") + std::to_string(id.as_int());
      }
    }
    // Transformers' decode leaves such ids out without a word; the text alone would not say why it is short.
    if (!unknown.empty()) {
      logging::log(logging::Level::warning, "stdin element " + std::to_string(i) + ": ids " + unknown +
                                                " are not in the vocabulary of " + m.id +
                                                " and decode to nothing, as in Transformers");
    }
    out.emplace_back(tokenizer.decode(ids, skip_special));
  }
  std::cout << json::dump(json::Value(std::move(out))) << "\n";
  return 0;
}

}  // namespace

const Command kTokenizeCommand{
    "tokenize", "text to token ids with a model's tokenizer",
    "usage: tfm tokenize [--model ID|DIR] [--no-special-tokens]\n\n"
    "Reads a JSON array of strings on stdin and prints a JSON array with the ids of\n"
    "each, as tokenizer(s)[\"input_ids\"] in Transformers. The model needs tokenizer.json\n"
    "(and tokenizer_config.json when it has one); a Hub id downloads no weights.\n\noptions:\n"
    "  --no-special-tokens         as add_special_tokens=False\n" +
        std::string(kModelHelp),
    tokenize};

const Command kDetokenizeCommand{
    "detokenize", "token ids to text with a model's tokenizer",
    "usage: tfm detokenize [--model ID|DIR] [--skip-special-tokens]\n\n"
    "Reads a JSON array of id lists on stdin and prints a JSON array of strings, as\n"
    "tokenizer.decode(ids) in Transformers: ids outside the vocabulary decode to nothing\n"
    "(with a warning here).\n\noptions:\n"
    "  --skip-special-tokens       as skip_special_tokens=True\n" +
        std::string(kModelHelp),
    detokenize};

}  // namespace tfm::cli

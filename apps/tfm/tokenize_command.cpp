// `tfm tokenize` and `tfm detokenize`: the tokenizer of a model over JSON on stdin, as
// tokenizer(s, add_special_tokens=...)["input_ids"] and tokenizer.decode(ids, skip_special_tokens=...).
#include <iostream>

#include "commands.h"
#include "model_args.h"
#include "stdin_requests.h"
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
  const std::vector<std::string> texts = parse_texts_request(read_stdin());
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
  const std::vector<std::vector<int64_t>> id_lists = parse_id_lists_request(read_stdin());
  const auto tokenizer = tokenizer::AutoTokenizer::from_pretrained(m.dir, m.id);
  json::Array out;
  for (size_t i = 0; i < id_lists.size(); ++i) {
    std::string unknown;
    for (int64_t id : id_lists[i]) {
      if (id < 0 || tokenizer.id_to_token(id)) continue;
      unknown += (unknown.empty() ? "" : ", ") + std::to_string(id);
    }
    // Transformers' decode leaves such ids out without a word; the text alone would not say why it is short.
    if (!unknown.empty()) {
      logging::log(logging::Level::warning, "stdin element " + std::to_string(i) + ": ids " + unknown +
                                                " are not in the vocabulary of " + m.id +
                                                " and decode to nothing, as in Transformers");
    }
    out.emplace_back(tokenizer.decode(id_lists[i], skip_special));
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

// Malformed tokenizer.json and tokenizer_config.json: each gives a tfm::Error naming the problem, and
// random damage to a valid file never crashes (it loads, or fails with tfm::Error).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "test_paths.h"
#include "tfm/core/error.h"
#include "tfm/tokenizer/tokenizer.h"
#include "tfm/tokenizer/tokenizer_json.h"

namespace tfm::tokenizer {
namespace {

// The error message of loading this tokenizer.json text, or "" when it loads.
std::string load_error(const std::string& text) {
  try {
    Tokenizer::from_json(TokenizerJson::parse(text));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* const kValid = R"({
  "added_tokens": [{"id": 3, "content": "<s>", "special": true}],
  "normalizer": {"type": "Lowercase"},
  "pre_tokenizer": {"type": "Whitespace"},
  "post_processor": null,
  "decoder": {"type": "BPEDecoder", "suffix": "</w>"},
  "model": {"type": "BPE", "unk_token": "<unk>", "vocab": {"<unk>": 0, "a": 1, "b": 2, "<s>": 3, "ab": 4},
            "merges": ["a b"]}
})";

std::string with(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(LoaderErrors, ValidBaseLoads) {
  EXPECT_EQ(load_error(kValid), "");
}

TEST(LoaderErrors, BadJsonNamesLineAndColumn) {
  try {
    json::parse(with(kValid, "\"merges\": [\"a b\"]", "\"merges\": [\"a b\",]"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line"), std::string::npos) << e.what();
  }
}

TEST(LoaderErrors, UnknownComponentTypeIsNamed) {
  EXPECT_NE(
      load_error(with(kValid, "\"Lowercase\"", "\"Uppercase\"")).find("unknown normalizer type 'Uppercase'"),
      std::string::npos);
  EXPECT_NE(
      load_error(with(kValid, "\"Whitespace\"", "\"Spaces\"")).find("unknown pre_tokenizer type 'Spaces'"),
      std::string::npos);
  EXPECT_NE(load_error(with(kValid, "\"BPEDecoder\"", "\"Nope\"")).find("unknown decoder type 'Nope'"),
            std::string::npos);
  EXPECT_NE(
      load_error(with(kValid, "\"type\": \"BPE\"", "\"type\": \"GPT\"")).find("unknown model type 'GPT'"),
      std::string::npos);
}

TEST(LoaderErrors, MissingFieldsAreNamed) {
  EXPECT_NE(
      load_error(with(kValid, "\"merges\": [\"a b\"]", "\"x\": 1")).find("model BPE: missing field 'merges'"),
      std::string::npos);
  EXPECT_NE(load_error(R"({"model": null})").find("missing field 'model'"), std::string::npos);
  EXPECT_NE(
      load_error(with(kValid, "{\"type\": \"BPEDecoder\", \"suffix\": \"</w>\"}", "{\"type\": \"Replace\"}"))
          .find("decoder Replace: missing field 'pattern'"),
      std::string::npos);
  EXPECT_NE(
      load_error(with(kValid, "\"content\": \"<s>\", ", "")).find("added_tokens[0]: missing field 'content'"),
      std::string::npos);
}

TEST(LoaderErrors, MergeWithUnknownTokenIsNamed) {
  EXPECT_NE(load_error(with(kValid, "[\"a b\"]", "[\"a zz\"]")).find("merge 0 names token 'zz'"),
            std::string::npos);
  EXPECT_NE(load_error(with(kValid, "[\"a b\"]", "[\"a b\", \"b a\"]")).find("merge 1 names token 'ba'"),
            std::string::npos);
  EXPECT_NE(load_error(with(kValid, "[\"a b\"]", "[\"a b c\"]")).find("merge 0 must be two tokens"),
            std::string::npos);
}

TEST(LoaderErrors, WrongTypesAreNamed) {
  EXPECT_NE(load_error(with(kValid, "\"a\": 1,", "\"a\": \"one\",")).find("vocab entry 'a'"),
            std::string::npos);
  EXPECT_NE(load_error(with(kValid, "\"a\": 1,", "\"a\": 99999999,")).find("far beyond"), std::string::npos);
  EXPECT_NE(load_error(R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})").find("unk_token '[UNK]'"),
            std::string::npos);
  EXPECT_NE(
      load_error(R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]], "unk_id": 5}})").find("unk_id 5"),
      std::string::npos);
  EXPECT_NE(
      load_error(R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(["}, "behavior": "Isolated"},
                          "model": {"type": "WordLevel", "vocab": {}}})")
          .find("invalid regex '(['"),
      std::string::npos);
}

// The vocab and merges are read straight from the text (tokenizer_json.h): their syntax errors still name
// the line and column in the whole file, and a part the model does not use is still checked.
TEST(LoaderErrors, SyntaxErrorsInsideVocabAndMergesNameTheirPlaceInTheFile) {
  const std::string broken_vocab = with(kValid, "\"b\": 2,", "\"b\" 2,");
  EXPECT_NE(load_error(broken_vocab).find("line 7 column"), std::string::npos) << load_error(broken_vocab);
  const std::string broken_merges = with(kValid, "[\"a b\"]", "[\"a b\" \"b a\"]");
  EXPECT_NE(load_error(broken_merges).find("line 8 column 30"), std::string::npos)
      << load_error(broken_merges);
  const std::string word_level = R"({"model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a",
                                               "merges": [1 2]}})";
  EXPECT_NE(load_error(word_level).find("expected ',' or ']'"), std::string::npos) << load_error(word_level);
  EXPECT_EQ(load_error(with(word_level, "[1 2]", "[1, 2]")), "");
}

// A token listed twice in the vocabulary keeps its last id, as Python's json and the Rust library read it;
// the id it had before is left without a token. Small and large vocabularies (the latter filled from every
// thread).
TEST(LoaderErrors, ATokenListedTwiceKeepsItsLastId) {
  for (const int size : {8, 20000}) {
    std::string vocab = R"({"a": 0)";
    for (int i = 1; i < size; ++i) vocab += ", \"t" + std::to_string(i) + "\": " + std::to_string(i);
    vocab += ", \"t3\": " + std::to_string(size) + ", \"a\": " + std::to_string(size + 1) + "}";
    const Tokenizer t = Tokenizer::from_json(TokenizerJson::parse(
        R"({"model": {"type": "WordLevel", "unk_token": "a", "vocab": )" + vocab + "}}"));
    SCOPED_TRACE(size);
    EXPECT_EQ(t.token_to_id("a"), size + 1);
    EXPECT_EQ(t.token_to_id("t3"), size);
    EXPECT_EQ(t.id_to_token(0), std::nullopt);
    EXPECT_EQ(t.id_to_token(3), std::nullopt);
    EXPECT_EQ(t.id_to_token(size), "t3");
    EXPECT_EQ(t.vocab_size(), static_cast<size_t>(size));
  }
}

TEST(LoaderErrors, MissingFolderAndFileAreNamed) {
  try {
    AutoTokenizer::from_pretrained("/nonexistent/tfm-folder");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tfm-folder"), std::string::npos);
  }
  const auto dir = std::filesystem::temp_directory_path() / "tfm_tokenizer_loader_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << kValid;
  std::ofstream(dir / "tokenizer_config.json") << R"({"bos_token": 5})";
  try {
    AutoTokenizer::from_pretrained(dir.string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bos_token"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// Loads (and, when that works, uses) a damaged file; anything but tfm::Error escaping is a failure.
void load_and_use(const std::string& text) {
  try {
    const Tokenizer t = Tokenizer::from_json(TokenizerJson::parse(text));
    const auto ids = t.encode("ab a b <s> abba \xff");
    t.decode(ids);
  } catch (const Error&) {
  }
}

TEST(LoaderFuzz, RandomByteDamageNeverCrashes) {
  const std::string base = json::dump(
      json::parse_file(testing::tests_dir() + "/families/bpe_suffix/tokenizer.json"));  // one line, smaller
  std::mt19937 rng(1234);
  for (int round = 0; round < 200; ++round) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 4) {
        case 0:
          text[at] = static_cast<char>(rng() % 256);
          break;
        case 1:
          text.erase(at, 1 + rng() % 8);
          break;
        case 2:
          text.insert(at, std::string(1, "{}[]\",:0-"[rng() % 9]));
          break;
        case 3:
          text.resize(at);
          break;
      }
    }
    load_and_use(text);
  }
}

// Every value of a small but complete file replaced, one at a time, by values of other types.
void replace_each(json::Value& root, json::Value& node, std::mt19937& rng) {
  const json::Value replacements[] = {json::Value(),
                                      json::Value(-1),
                                      json::Value("x"),
                                      json::Value(json::Array{}),
                                      json::Value(json::Object{}),
                                      json::Value(3.5),
                                      json::Value(true)};
  auto try_all = [&](json::Value& slot) {
    const json::Value saved = slot;
    for (const json::Value& r : replacements) {
      slot = r;
      load_and_use(json::dump(root));
    }
    slot = saved;
    replace_each(root, slot, rng);
  };
  if (node.is_object())
    for (auto& [key, value] : node.as_object()) try_all(value);
  else if (node.is_array())
    for (json::Value& value : node.as_array()) try_all(value);
}

TEST(LoaderFuzz, EveryFieldWithEveryTypeNeverCrashes) {
  json::Value root = json::parse(R"({
    "added_tokens": [{"id": 5, "content": "<s>", "special": true, "lstrip": true, "rstrip": false,
                      "normalized": false, "single_word": true}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Strip", "strip_left": true},
                   {"type": "Replace", "pattern": {"Regex": "a+"}, "content": "a"}, {"type": "Prepend", "prepend": "_"},
                   {"type": "BertNormalizer", "lowercase": true}]},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": true},
        {"type": "Metaspace", "replacement": "_", "prepend_scheme": "first", "split": true},
        {"type": "Digits", "individual_digits": true}, {"type": "CharDelimiterSplit", "delimiter": "-"},
        {"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}, {"type": "Punctuation"}]},
    "post_processor": {"type": "Sequence", "processors": [
        {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                  {"Sequence": {"id": "A", "type_id": 0}}],
         "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]}}},
        {"type": "RobertaProcessing", "sep": ["<s>", 5], "cls": ["<s>", 5]}]},
    "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Strip", "content": " ", "start": 1,
                "stop": 2}, {"type": "CTC"}, {"type": "WordPiece"}, {"type": "Metaspace"}, {"type": "Fuse"}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true,
              "continuing_subword_prefix": "##", "end_of_word_suffix": "</w>",
              "vocab": {"<unk>": 0, "a": 1, "##b": 2, "ab": 3, "<0x41>": 4, "<s>": 5}, "merges": [["a", "##b"]]}
  })");
  std::mt19937 rng(99);
  replace_each(root, root, rng);
  load_and_use(json::dump(root));
}

}  // namespace
}  // namespace tfm::tokenizer

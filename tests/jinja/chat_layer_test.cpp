// The chat layer: where templates are found, which one is chosen, and which special tokens a template sees,
// against what Transformers does (goldens/loading.json, goldens/special_tokens.json).
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/test_assets.h"
#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/tokenizer/chat_template.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;
const std::string kGoldens = TFM_SOURCE_DIR "/tests/jinja/goldens/";

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("tfm_chat_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& rel, const std::string& text) const {
    fs::create_directories((path_ / rel).parent_path());
    std::ofstream(path_ / rel, std::ios::binary) << text;
  }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

ChatTemplateInputs user_message() {
  ChatTemplateInputs in;
  in.messages = json::parse(R"([{"role": "user", "content": "x"}])");
  return in;
}

TEST(ChatLayer, TemplateLoadingAndSelectionMatchTransformers) {
  const json::Value cases = json::parse_file(kGoldens + "loading.json");
  ASSERT_GE(cases.size(), 5u);
  for (const auto& c : cases.as_array()) {
    SCOPED_TRACE(c.at("name").as_string());
    TempDir dir;
    json::Value config = json::Object{};
    if (!c.at("config_chat_template").is_null()) config.set("chat_template", c.at("config_chat_template"));
    dir.write("tokenizer_config.json", json::dump(config));
    for (const auto& [rel, text] : c.at("files").as_object()) dir.write(rel, text.as_string());
    const ChatTemplates templates = load_chat_templates(dir.path().string(), config);
    for (const auto& [label, expected] : c.at("results").as_object()) {
      SCOPED_TRACE(label);
      ChatTemplateInputs in = user_message();
      if (label == "tools") in.tools = json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
      if (label == "named_tool_use") in.chat_template = "tool_use";
      if (expected.as_string().rfind("error:", 0) == 0) {
        EXPECT_THROW(apply_chat_template(templates, config, in), Error);
      } else {
        EXPECT_EQ(apply_chat_template(templates, config, in), expected.as_string());
      }
    }
  }
}

TEST(ChatLayer, LegacyChatTemplateJsonIsTheLastResort) {
  TempDir dir;
  dir.write("chat_template.json", R"({"chat_template": "legacy {{ messages[0].content }}"})");
  const ChatTemplates templates = load_chat_templates(dir.path().string(), json::Object{});
  EXPECT_EQ(apply_chat_template(templates, json::Object{}, user_message()), "legacy x");
  const json::Value config = json::parse(R"({"chat_template": "config"})");
  EXPECT_EQ(apply_chat_template(load_chat_templates(dir.path().string(), config), config, user_message()),
            "config");
}

TEST(ChatLayer, JinjaFileKeepsTextButDropsOneTrailingNewline) {
  TempDir dir;
  dir.write("chat_template.jinja", "{{ bos_token }}A\r\nB\n");
  const json::Value config = json::parse(R"({"bos_token": {"__type": "AddedToken", "content": "<s>"}})");
  EXPECT_EQ(apply_chat_template(load_chat_templates(dir.path().string(), config), config, user_message()),
            "<s>A\nB");
}

TEST(ChatLayer, SpecialTokensMatchTransformers) {
  const json::Value base =
      json::parse_file(test_support::shipped_tokenizer("qwen3") + "/tokenizer_config.json");
  const json::Value cases = json::parse_file(kGoldens + "special_tokens.json");
  ASSERT_GE(cases.size(), 5u);
  for (const auto& c : cases.as_array()) {
    SCOPED_TRACE(c.at("name").as_string());
    TempDir dir;
    json::Object config;
    for (const auto& [k, v] : base.as_object()) {
      const json::Value* change = c.at("changes").find(k);
      if (!change)
        config.emplace_back(k, v);
      else if (!change->is_null())
        config.emplace_back(k, *change);
    }
    for (const auto& [k, v] : c.at("changes").as_object()) {
      if (k == "special_tokens_map.json")
        dir.write(k, json::dump(v));
      else if (!base.contains(k))
        config.emplace_back(k, v);
    }
    dir.write("tokenizer_config.json", json::dump(json::Value(config)));
    json::Value got = json::Object{};
    for (const auto& [k, v] : chat_template_special_tokens(read_tokenizer_config(dir.path().string())))
      got.set(k, v);
    const json::Value& expected = c.at("special_tokens_map");
    EXPECT_EQ(got.size(), expected.size()) << json::dump(got);
    for (const auto& [k, v] : expected.as_object()) {
      const json::Value* g = got.find(k);
      ASSERT_NE(g, nullptr) << k;
      EXPECT_EQ(*g, v) << k;
    }
  }
}

TEST(ChatLayer, RejectsWhatTransformersRejects) {
  ChatTemplates t;
  t.single = "{{ messages|length }}";
  ChatTemplateInputs empty;
  EXPECT_THROW(apply_chat_template(t, json::Object{}, empty), Error);
  ChatTemplateInputs bad_tools = user_message();
  bad_tools.tools = json::parse(R"(["not a schema"])");
  EXPECT_THROW(apply_chat_template(t, json::Object{}, bad_tools), Error);
  ChatTemplates several;
  several.named = {{"a", "A"}, {"b", "B"}};
  EXPECT_THROW(apply_chat_template(several, json::Object{}, user_message()), Error);
}

TEST(ChatLayer, StrftimeNowFormatsTheLocalTime) {
  ChatTemplates t;
  t.single = "{{ strftime_now('%Y-%m-%d') }}|{{ strftime_now('%d %B %Y') | length > 8 }}";
  char expected[32];
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(expected, sizeof expected, "%Y-%m-%d", &local);
  EXPECT_EQ(apply_chat_template(t, json::Object{}, user_message()), std::string(expected) + "|True");
}

TEST(ChatLayer, ReservedNamesCannotBeVariables) {
  ChatTemplates t;
  t.single = "{{ messages }}";
  ChatTemplateInputs in = user_message();
  in.variables.emplace_back("messages", "x");
  EXPECT_THROW(apply_chat_template(t, json::Object{}, in), Error);
}

TEST(ChatLayer, VariablesOverrideSpecialTokens) {
  ChatTemplates t;
  t.single = "{{ bos_token }}|{{ eos_token }}|{{ custom }}";
  const json::Value config = json::parse(R"({"bos_token": "<s>", "eos_token": "</s>"})");
  ChatTemplateInputs in = user_message();
  in.variables.emplace_back("eos_token", "E");
  in.variables.emplace_back("custom", json::parse("[1, true, null]"));
  EXPECT_EQ(apply_chat_template(t, config, in), "<s>|E|[1, True, None]");
}

}  // namespace
}  // namespace tfm

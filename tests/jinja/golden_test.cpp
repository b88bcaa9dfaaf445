// Templates rendered by tfm compared with the renderings Transformers (jinja2) recorded in goldens/ by
// tests/fixtures/make_chat_template_goldens.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/test_assets.h"
#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/tokenizer/chat_template.h"

namespace tfm {
namespace {

const std::string kGoldens = TFM_SOURCE_DIR "/tests/jinja/goldens/";
const std::string kQwen3 = test_support::shipped_tokenizer("qwen3");

ChatTemplateInputs inputs_from(const json::Value& j) {
  ChatTemplateInputs in;
  for (const auto& [key, value] : j.as_object()) {
    if (key == "messages")
      in.messages = value;
    else if (key == "add_generation_prompt")
      in.add_generation_prompt = value.as_bool();
    else if (key == "tools")
      in.tools = value;
    else if (key == "documents")
      in.documents = value;
    else if (key == "continue_final_message")
      in.continue_final_message = value.is_string() ? value.as_string() : "content";
    else
      in.variables.emplace_back(key, value);
  }
  return in;
}

TEST(JinjaGolden, SyntaxCasesMatchJinja2) {
  const json::Value cases = json::parse_file(kGoldens + "syntax.json");
  ASSERT_GT(cases.size(), 100u);
  for (const auto& c : cases.as_array()) {
    const std::string& name = c.at("name").as_string();
    SCOPED_TRACE(name);
    jinja::Variables vars;
    for (const auto& [k, v] : c.at("variables").as_object()) vars.emplace_back(k, jinja::Value::from_json(v));
    std::string output, error;
    try {
      output =
          compile_chat_template(c.at("template").as_string()).render(vars, transformers_jinja_environment());
    } catch (const Error& e) {
      error = e.what();
    }
    if (const json::Value* expected = c.find("output")) {
      EXPECT_EQ(error, "");
      EXPECT_EQ(output, expected->as_string());
    } else {
      EXPECT_NE(error, "") << "expected an error like: " << c.at("error").as_string();
    }
  }
}

TEST(JinjaGolden, Qwen3TemplateMatchesTransformers) {
  const json::Value config = json::parse_file(kQwen3 + "/tokenizer_config.json");
  const ChatTemplates templates = load_chat_templates(kQwen3, config);
  ASSERT_TRUE(templates.single.has_value());
  const json::Value cases = json::parse_file(kGoldens + "qwen3.json");
  ASSERT_GT(cases.size(), 10u);
  for (const auto& c : cases.as_array()) {
    SCOPED_TRACE(c.at("name").as_string());
    EXPECT_EQ(apply_chat_template(templates, config, inputs_from(c.at("inputs"))),
              c.at("output").as_string());
  }
}

TEST(JinjaGolden, ModelFamilyTemplatesMatchTransformers) {
  const json::Value cases = json::parse_file(kGoldens + "families.json");
  ASSERT_GT(cases.size(), 20u);
  for (const auto& c : cases.as_array()) {
    const std::string& family = c.at("family").as_string();
    SCOPED_TRACE(family + "/" + c.at("name").as_string());
    ChatTemplates templates;
    templates.single = [&] {
      std::ifstream in(TFM_SOURCE_DIR "/tests/jinja/templates/" + family + ".jinja", std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    }();
    const json::Value config = c.at("special_tokens");
    std::string output, error;
    try {
      output = apply_chat_template(templates, config, inputs_from(c.at("inputs")));
    } catch (const Error& e) {
      error = e.what();
    }
    if (const json::Value* expected = c.find("output")) {
      EXPECT_EQ(error, "");
      EXPECT_EQ(output, expected->as_string());
    } else {
      EXPECT_NE(error, "") << "expected an error like: " << c.at("error").as_string();
    }
  }
}

// lipsum and random draw at random, so their outputs are checked for the shape jinja2's have.
TEST(JinjaGolden, RandomFiltersHaveJinja2sShape) {
  const auto render = [](const std::string& source) {
    return compile_chat_template(source).render({}, transformers_jinja_environment());
  };
  for (int i = 0; i < 20; ++i) {
    const std::string html = render("{{ lipsum() }}");
    ASSERT_EQ(html.substr(0, 3), "<p>");
    std::vector<std::string> paragraphs;
    for (size_t b = 0, e = 0; e != std::string::npos; b = e + 1) {
      e = html.find('\n', b);
      paragraphs.push_back(html.substr(b, e - b));
    }
    ASSERT_EQ(paragraphs.size(), 5u) << html;
    for (const auto& p : paragraphs) {
      EXPECT_EQ(p.substr(p.size() - 5), ".</p>");
      EXPECT_TRUE(p[3] >= 'A' && p[3] <= 'Z') << p;
      const size_t words = std::count(p.begin(), p.end(), ' ') + 1;
      EXPECT_GE(words, 20u);
      EXPECT_LT(words, 100u);
    }
    const std::string plain = render("{{ lipsum(2, false, 3, 5) }}");
    const size_t gap = plain.find("\n\n");
    ASSERT_NE(gap, std::string::npos);
    for (const std::string& p : std::vector<std::string>{plain.substr(0, gap), plain.substr(gap + 2)}) {
      const size_t words = std::count(p.begin(), p.end(), ' ') + 1;
      EXPECT_TRUE(words == 3 || words == 4) << p;
      EXPECT_EQ(p.back(), '.');
    }
    const std::string picked = render("{{ [1, 2, 3]|random }}{{ 'xyz'|random }}{{ []|random is defined }}");
    EXPECT_NE(std::string("123").find(picked[0]), std::string::npos);
    EXPECT_NE(std::string("xyz").find(picked[1]), std::string::npos);
    EXPECT_EQ(picked.substr(2), "False");
  }
}

}  // namespace
}  // namespace tfm

// choose_tokenizer_class against the class Transformers' AutoTokenizer picked for the same config.json,
// tokenizer_config.json and name (tests/fixtures/make_class_choice_references.py).
#include "tfm/tokenizer/tokenizer_class_choice.h"

#include <gtest/gtest.h>

#include "test_paths.h"
#include "tfm/core/error.h"

namespace tfm::tokenizer {
namespace {

TEST(ClassChoice, PicksTheClassTransformersPicks) {
  const json::Value cases = testing::reference("class_choice").at("cases");
  ASSERT_GT(cases.size(), 20u);
  for (const json::Value& c : cases.as_array()) {
    SCOPED_TRACE(json::dump(c));
    const std::string& expected = c.at("class").as_string();
    std::string got;
    try {
      const ChosenClass chosen =
          choose_tokenizer_class(c.at("config"), c.at("tokenizer_config"), c.at("name").as_string());
      got = chosen.kind == ClassKind::python ? "error: a Python tokenizer" : chosen.name;
    } catch (const Error& e) {
      got = std::string("error: ") + e.what();
    }
    if (expected.starts_with("error"))
      EXPECT_TRUE(got.starts_with("error")) << got;
    else
      EXPECT_EQ(got, expected);
  }
}

}  // namespace
}  // namespace tfm::tokenizer

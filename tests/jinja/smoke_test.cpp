#include <gtest/gtest.h>

#include "tfm/jinja/template.h"

namespace tfm::jinja {
namespace {

TEST(JinjaSmoke, RendersText) {
  const Environment env = Environment::jinja2_defaults();
  EXPECT_EQ(Template("a{{ 1 + 2 }}b").render({}, env), "a3b");
}

}  // namespace
}  // namespace tfm::jinja

// Hostile or broken templates end with an error naming the line, in bounded time and memory.
#include <gtest/gtest.h>

#include <string>

#include "tfm/core/error.h"
#include "tfm/tokenizer/chat_template.h"

namespace tfm {
namespace {

std::string render(const std::string& source, const jinja::Limits& limits = {}) {
  return compile_chat_template(source).render({}, transformers_jinja_environment(), limits);
}

std::string error_of(const std::string& source, const jinja::Limits& limits = {}) {
  try {
    render(source, limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JinjaLimits, EndlessLoopsStopAtTheStepLimit) {
  jinja::Limits small;
  small.max_steps = 10'000;
  const std::string e =
      error_of("{% for i in range(100000) %}\n{% for j in range(100000) %}{% endfor %}{% endfor %}", small);
  EXPECT_NE(e.find("template line 2"), std::string::npos) << e;
  EXPECT_NE(e.find("10000 steps"), std::string::npos) << e;
}

TEST(JinjaLimits, EndlessRecursionStops) {
  const std::string e = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(e.find("nested more than"), std::string::npos) << e;
}

TEST(JinjaLimits, OutputGrowthStops) {
  jinja::Limits small;
  small.max_output_bytes = 1 << 20;
  EXPECT_NE(
      error_of(
          "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
          small)
          .find("over the limit"),
      std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 100000000000 }}", small).find("over the limit"), std::string::npos);
  EXPECT_NE(error_of("{% for i in range(100000) %}{{ 'abcdefghijklmnopqrstuvwxyz' }}{% endfor %}", small)
                .find("over the limit"),
            std::string::npos);
}

TEST(JinjaLimits, SelfSharingValuesStayBounded) {
  // Each step doubles the printed size of the list while its memory stays small.
  const std::string doubling =
      "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}";
  EXPECT_NE(error_of(doubling + "{{ ns.l }}").find("too large"), std::string::npos);
  EXPECT_NE(error_of(doubling + "{{ ns.l|tojson }}").find("too large"), std::string::npos);
  EXPECT_NE(error_of(doubling + "{{ ns.l == ns.l }}").find("too large"), std::string::npos);
  const std::string deep =
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}";
  EXPECT_NE(error_of(deep).find("nested more than"), std::string::npos);
  const std::string deep_dict =
      "{% set ns = namespace(d={}) %}{% for i in range(100000) %}{% set ns.d = {'k': ns.d} %}{% endfor %}";
  EXPECT_NE(error_of(deep_dict).find("nested more than"), std::string::npos);
  EXPECT_EQ(render("{% set ns = namespace(l=[]) %}{% for i in range(3) %}{% set ns.l = [ns.l] %}{% endfor "
                   "%}{{ ns.l }}"),
            "[[[[]]]]");
}

TEST(JinjaLimits, DeepNestingIsASyntaxErrorNotACrash) {
  EXPECT_NE(error_of("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"), "");
  EXPECT_NE(error_of("{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}"), "");
  std::string nested_ifs;
  for (int i = 0; i < 5000; ++i) nested_ifs += "{% if true %}";
  EXPECT_NE(error_of(nested_ifs), "");
  EXPECT_NE(error_of("{{ " + std::string(100000, '-') + "1 }}"), "");
  std::string nots = "{{ ";
  for (int i = 0; i < 50000; ++i) nots += "not ";
  EXPECT_NE(error_of(nots + "1 }}"), "");
}

TEST(JinjaLimits, ErrorsNameTheTemplateLine) {
  EXPECT_EQ(error_of("a\nb\n{{ missing.x }}"), "template line 3: 'missing' is undefined");
  EXPECT_EQ(error_of("a\n\n{% if true %}\n{{ raise_exception('custom message') }}{% endif %}"),
            "template line 4: custom message");
  const std::string syntax = error_of("line 1\n{% if x %}\n{% endfor %}");
  EXPECT_NE(syntax.find("line 3"), std::string::npos) << syntax;
  EXPECT_NE(error_of("{{ 'a' + 1 }}").find("can only concatenate str (not \"int\") to str"),
            std::string::npos);
}

TEST(JinjaLimits, TruncatedTemplatesFail) {
  const std::string tmpl = "{%- for m in messages %}{{ m['content'] | trim }}{%- endfor %}";
  for (size_t n = 2; n < tmpl.size(); ++n) {
    SCOPED_TRACE(tmpl.substr(0, n));
    EXPECT_THROW(compile_chat_template(tmpl.substr(0, n)), Error);
  }
}

}  // namespace
}  // namespace tfm

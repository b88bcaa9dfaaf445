// Hostile or broken templates end with an error naming the line, in bounded time and memory.
#include <gtest/gtest.h>
#include <pthread.h>

#include <functional>
#include <string>
#include <vector>

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

// ---- integers: Python's are unbounded, tfm's have 64 bits; past them is an error, never a trap or a wrap
// ----

TEST(JinjaLimits, IntegerOverflowIsAnError) {
  const std::string min = "(-9223372036854775807 - 1)";
  for (const std::string& expr : std::vector<std::string>{
           min + " // -1", min + " * 2", "9223372036854775807 + 1", min + " - 1", "-" + min, min + "|abs",
           "2 ** 63", "(-3) ** 41", "7 ** 9223372036854775807", "1e300|int", "'1e300'|int", "'%d' % 1e300",
           "[1, 2, 3]|sum(start=9223372036854775807)", min + "|round(-1)", "9223372036854775807|round(-1)"}) {
    SCOPED_TRACE(expr);
    EXPECT_NE(error_of("{{ " + expr + " }}").find("integer overflow"), std::string::npos);
  }
  EXPECT_NE(error_of("{{ 1e400|int }}").find("infinity"), std::string::npos);
  EXPECT_NE(error_of("{{ 99999999999999999999 }}").find("too large"), std::string::npos);
  EXPECT_NE(error_of("{{ x.99999999999999999999 }}"), "");
  // What fits gives Python's answers, at the edges too.
  EXPECT_EQ(render("{{ " + min + " % -1 }} {{ " + min +
                   " is divisibleby(-1) }} {{ (-1) ** 3 }} {{ (-2) ** 63 }} "
                   "{{ 0 ** 0 }} {{ (1e400 - 1e400)|int }} {{ 1.5|round(" +
                   min + ") }} {{ 15|round(" + min + ") }}"),
            "0 True -1 -9223372036854775808 1 0 0.0 0");
  EXPECT_EQ(render("{{ range(10, 9223372036854775807, 4611686018427387904)|list }} "
                   "{{ range(9223372036854775806, " +
                   min + ", -9223372036854775807)|list }}"),
            "[10, 4611686018427387914] [9223372036854775806, -1]");
  EXPECT_EQ(
      render("{{ [1, 2, 3][1::9223372036854775807] }} {{ 'abc'[" + min + ":] }} {{ 'abc'[::" + min + "] }}"),
      "[2] abc c");
}

// ---- nesting: no chain or nest of expressions, statements or calls recurses past the stack ----

std::string chain(const std::string& first, const std::string& link, int n) {
  std::string s = first;
  for (int i = 0; i < n; ++i) s += link;
  return s;
}

TEST(JinjaLimits, LongChainsAreSyntaxErrorsNotCrashes) {
  const int n = 100000;
  for (const std::string& expr : std::vector<std::string>{chain("1", " + 1", n),
                                                          chain("1", " - 1", n),
                                                          chain("1", " * 1", n),
                                                          chain("1", " // 1", n),
                                                          chain("1", " ** 1", n),
                                                          chain("1", " or 1", n),
                                                          chain("1", " and 1", n),
                                                          chain("'a'", "|upper", n),
                                                          chain("x", "[0]", n),
                                                          chain("x", ".a", n),
                                                          chain("x", "[0:1]", n),
                                                          chain("f", "()", n),
                                                          chain("1", " if 1", n),
                                                          chain("", "1 if 0 else ", n) + "2",
                                                          chain("", "not ", n) + "1",
                                                          chain("", "- ", n) + "1",
                                                          chain("", "(", n) + "1" + chain("", ")", n),
                                                          chain("", "[", n) + chain("", "]", n),
                                                          chain("", "{'a': ", n) + "1" + chain("", "}", n),
                                                          chain("", "f(", n) + chain("", ")", n)}) {
    SCOPED_TRACE(expr.substr(0, 40));
    const std::string e = error_of("\n{{ " + expr + " }}");
    EXPECT_NE(e.find("syntax error at line 2"), std::string::npos) << e;
    EXPECT_NE(e.find("nested"), std::string::npos) << e;
  }
  // ~ is one node however long, as in Jinja2.
  EXPECT_EQ(render("{{ " + chain("'a'", " ~ 'a'", n - 1) + " }}"), std::string(n, 'a'));
}

TEST(JinjaLimits, NestingAcrossCallsIsBoundedBeforeTheStackIs) {
  jinja::Limits deep_calls;  // only the nesting limit stops these
  deep_calls.max_depth = 1'000'000;
  for (const std::string& tmpl : std::vector<std::string>{
           "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
           "{% macro f(n) %}{% if true %}{% for i in [1] %}{% with %}{{ f(n + 1) }}{% endwith %}{% endfor %}"
           "{% endif %}{% endmacro %}{{ f(0) }}",
           "{% macro f(n) %}{{ " + chain("", "- ", 150) + "f(n + 1) }}{% endmacro %}{{ f(0) }}",
           "{% macro f() %}{% call f() %}x{% endcall %}{% endmacro %}{{ f() }}",
           "{% macro f() %}{{ caller() }}{% endmacro %}{% macro g() %}{% call f() %}{{ g() }}{% endcall %}"
           "{% endmacro %}{{ g() }}",
           "{% set l = [[1]] %}{% for x in l recursive %}{{ loop(l) }}{% endfor %}",
           "{% macro f(n) %}{{ [n]|map('string')|join ~ f(n + 1) }}{% endmacro %}{{ f(0) }}"}) {
    SCOPED_TRACE(tmpl);
    // The nesting limit, or the stack space left where 1500 levels do not fit (frames are larger under
    // AddressSanitizer).
    const std::string e = error_of(tmpl, deep_calls);
    EXPECT_TRUE(e.find("nested more than 1500 deep") != std::string::npos ||
                e.find("as deep as the stack allows") != std::string::npos)
        << e;
    // With the default limits, macro depth ends it first, or the nesting limit: never the stack.
    EXPECT_NE(error_of(tmpl).find("nested more than"), std::string::npos);
  }
}

// Runs f on a thread of its own whose stack holds `stack_bytes`.
void on_small_stack(size_t stack_bytes, std::function<void()> f) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, stack_bytes), 0);
  pthread_t thread;
  const auto run = [](void* arg) -> void* {
    (*static_cast<std::function<void()>*>(arg))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, run, &f), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

// A thread with less stack than the nesting limit assumes (a server's worker, say) gets an error too.
TEST(JinjaLimits, NestingStopsWhereTheThreadsStackEnds) {
  on_small_stack(256 << 10, [] {
    const std::string e = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
    EXPECT_NE(e.find("as deep as the stack allows"), std::string::npos) << e;
  });
}

// ---- sizes: a result over the value limit is refused before it is allocated ----

TEST(JinjaLimits, SizesAreCheckedBeforeBuilding) {
  jinja::Limits small;
  small.max_output_bytes = 1 << 20;
  const std::string t = "1000000000000";  // a million megabytes
  for (const std::string& tmpl :
       std::vector<std::string>{"{{ 'x'|center(" + t + ") }}",
                                "{{ 'x'.center(" + t + ") }}",
                                "{{ 'x'.ljust(" + t + ") }}",
                                "{{ 'x'.rjust(" + t + ", 'y') }}",
                                "{{ 'x'.zfill(" + t + ") }}",
                                "{{ 'a\\nb'|indent(" + t + ") }}",
                                "{{ 'a\\nb\\nc'|indent('x' * 600000) }}",
                                "{{ [1]|batch(" + t + ", 0)|list }}",
                                "{{ [1, 2]|slice(" + t + ")|list }}",
                                "{{ '%" + t + "s'|format('x') }}",
                                "{{ '%" + t + "d' % 1 }}",
                                "{{ '%." + t + "f' % 1 }}",
                                "{{ '{:" + t + "}'.format('x') }}",
                                "{{ '{:." + t + "f}'.format(1) }}",
                                "{{ 'abcd' * 4611686018427387905 }}",
                                "{{ [1, 2] * 1152921504606846977 }}",
                                "{{ ('x' * 1000)|replace('x', 'y' * 2000) }}",
                                "{{ ('x' * 1000).replace('x', 'y' * 2000) }}",
                                "{{ (['x' * 2000] * 1000)|join }}",
                                "{{ ' '.join(['x' * 2000] * 1000) }}",
                                "{{ ('x ' * 1000)|wordwrap(1, wrapstring='z' * 2000) }}",
                                "{{ [1]|tojson(indent=" + t + ") }}",
                                "{{ [[1]]|tojson(indent=600000) }}",
                                "{{ (['x' * 300000] * 4)|tojson }}",
                                "{{ ['x' * 300000] * 4 }}",
                                "{{ [['\\x01' * 300000]]|tojson }}",
                                "{{ ['\\x01' * 300000] }}",
                                "{{ 'x' * 600000 ~ 'x' * 600000 }}",
                                "{{ ('x,' * 100000).split(',') }}",
                                "{{ ('x' * 100000)|list }}",
                                "{% for c in 'x' * 100000 %}{% endfor %}",
                                "{{ ('é' * 200000)|urlencode }}",
                                "{{ ('www.a.com ' * 50000)|urlize }}",
                                "{{ lipsum(" + t + ") }}",
                                "{{ {'a': '<' * 300000}|xmlattr }}"}) {
    SCOPED_TRACE(tmpl);
    const std::string e = error_of(tmpl, small);
    EXPECT_TRUE(e.find("over the limit") != std::string::npos || e.find("bytes") != std::string::npos ||
                e.find("too big") != std::string::npos)
        << e;
  }
  // The same results that fit are built.
  EXPECT_EQ(render("{{ 'x'|center(5) }}|{{ '7'.zfill(3) }}|{{ [1]|batch(3, 0)|list }}"),
            "  x  |007|[[1, 0, 0]]");
}

TEST(JinjaLimits, HugeStringsAreReadWithoutACopyPerCharacter) {
  // 60 MB: a vector of one std::string per character would take gigabytes.
  EXPECT_EQ(render("{% set s = 'ab' * 30000000 %}{{ s[0] }}{{ s[-1] }}{{ s[1:4] }}{{ s|first }}{{ s|last }}"
                   "{{ s|length }}"),
            "abbabab60000000");
}

// ---- work: every operation is bounded, and so is the sum of what a render does ----

TEST(JinjaLimits, RepeatedCostlyOperationsStopAtTheWorkLimit) {
  jinja::Limits small;
  small.max_work_bytes = size_t{64} << 20;
  for (const std::string& tmpl : std::vector<std::string>{
           "{% set big = 'x' * 30000000 %}{% for i in range(100000) %}{% set c = big ~ '' %}{% endfor %}",
           "{% set big = 'x' * 30000000 %}{% for i in range(100000) %}{% if big == big ~ '' %}{% endif %}{% "
           "endfor %}",
           "{% set l = [[1]] * 1000000 %}{% for i in range(100000) %}{% if l == l %}{% endif %}{% endfor %}",
           "{% set l = [[1]] * 1000000 %}{% for i in range(100000) %}{% set s = l|string %}{% endfor %}",
           "{% set l = range(100000)|list %}{% for i in range(100000) %}{% if -1 in l %}{% endif %}{% endfor "
           "%}",
           "{% set s = 'x' * 30000000 %}{% for i in range(100000) %}{% if 'y' in s %}{% endif %}{% endfor %}",
           "{% set s = 'x' * 30000000 %}{% for i in range(100000) %}{{ s[-1] }}{% endfor %}"}) {
    SCOPED_TRACE(tmpl);
    EXPECT_NE(error_of(tmpl, small).find("copied, scanned or compared more than"), std::string::npos);
  }
  // A search for a long needle is linear: memmem, not a compare at each position.
  EXPECT_EQ(
      render("{% set a = 'a' * 30000000 %}{% set b = 'a' * 3000000 ~ 'b' %}{{ b in a }} {{ a.find(b) }} "
             "{{ a.rfind(b) }} {{ a.count(b) }} {{ a.split(b)|length }} {{ a.rsplit(b, 1)|length }}"),
      "False -1 -1 0 1 1");
}

}  // namespace
}  // namespace tfm

// Random templates combining what hostile ones use (deep nesting, extreme integers, huge widths, every
// filter, test, method and global with random arguments), and random mutations of a real chat template. Each
// must render or fail with tfm::Error, in bounded time: no crash, no other exception, no "internal error".
// TFM_JINJA_FUZZ_ITERATIONS runs more of them (the default keeps the suite fast).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "support/test_assets.h"
#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/tokenizer/chat_template.h"

namespace tfm {
namespace {

size_t iterations(size_t fallback) {
  const char* env = std::getenv("TFM_JINJA_FUZZ_ITERATIONS");
  return env ? std::strtoull(env, nullptr, 10) : fallback;
}

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  std::string template_text() {
    std::string out;
    const int n = pick(1, 4);
    for (int i = 0; i < n; ++i) out += statement(0);
    return out;
  }

 private:
  std::mt19937_64 rng_;

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  template <typename T>
  const T& one_of(const std::vector<T>& v) {
    return v[static_cast<size_t>(pick(0, static_cast<int>(v.size()) - 1))];
  }

  std::string literal() {
    static const std::vector<std::string> kLiterals = {"0",
                                                       "1",
                                                       "-1",
                                                       "2",
                                                       "7",
                                                       "255",
                                                       "9223372036854775807",
                                                       "(-9223372036854775807 - 1)",
                                                       "4611686018427387904",
                                                       "1000000000000",
                                                       "-1000000000000",
                                                       "0.0",
                                                       "-0.5",
                                                       "2.5",
                                                       "1e300",
                                                       "1e400",
                                                       "-1e400",
                                                       "''",
                                                       "'a'",
                                                       "'héllo wörld 日本'",
                                                       "'a-b c--d well-known'",
                                                       "'<b>x</b> &amp; &#39;'",
                                                       "'http://x.com/(a) www.y.org'",
                                                       "'x@y.z'",
                                                       "'{}'",
                                                       "'{:>5}'",
                                                       "'{0}{1}'",
                                                       "'%s %d'",
                                                       "'%(a)s'",
                                                       "'\\x01\\n\\t'",
                                                       "'  padded  '",
                                                       "'1_000'",
                                                       "'0x1f'",
                                                       "'nan'",
                                                       "'inf'",
                                                       "none",
                                                       "true",
                                                       "false",
                                                       "[]",
                                                       "[1, 2, 3]",
                                                       "['b', 'A', 'c']",
                                                       "[[1, 'a'], [2, 'b']]",
                                                       "{}",
                                                       "{'a': 1, 'b': [2]}",
                                                       "{'k': {'x': 'y'}}",
                                                       "(1, 2)",
                                                       "()",
                                                       "missing",
                                                       "s",
                                                       "l",
                                                       "d",
                                                       "n",
                                                       "messages",
                                                       "ns"};
    return one_of(kLiterals);
  }

  std::string args(int depth) {
    std::string out = "(";
    const int n = pick(0, 3);
    for (int i = 0; i < n; ++i) {
      if (i) out += ", ";
      if (pick(0, 4) == 0)
        out += one_of(std::vector<std::string>{"attribute", "default", "width", "indent", "start",
                                               "case_sensitive", "reverse"}) +
               "=";
      out += expression(depth + 1);
    }
    return out + ")";
  }

  std::string expression(int depth) {
    if (depth > 6) return literal();
    static const std::vector<std::string> kBinary = {
        " + ",   " - ",  " * ",  " / ",  " // ", " % ",  " ** ", " ~ ",
        " and ", " or ", " == ", " != ", " < ",  " >= ", " in ", " not in "};
    static const std::vector<std::string> kFilters = {
        "abs",    "attr",       "batch",       "capitalize", "center",   "count",
        "d",      "default",    "dictsort",    "e",          "escape",   "filesizeformat",
        "first",  "float",      "forceescape", "format",     "groupby",  "indent",
        "int",    "items",      "join",        "last",       "length",   "list",
        "lower",  "map",        "max",         "min",        "pprint",   "random",
        "reject", "rejectattr", "replace",     "reverse",    "round",    "safe",
        "select", "selectattr", "slice",       "sort",       "string",   "striptags",
        "sum",    "title",      "tojson",      "trim",       "truncate", "unique",
        "upper",  "urlencode",  "urlize",      "wordcount",  "wordwrap", "xmlattr"};
    static const std::vector<std::string> kTests = {
        "defined",         "undefined",      "none",     "number",   "integer", "string",
        "mapping",         "iterable",       "sequence", "callable", "odd",     "even",
        "divisibleby(-1)", "divisibleby(0)", "lower",    "upper",    "in([1])", "sameas(1)",
        "eq(1)",           "lt(2)",          "filter",   "test"};
    static const std::vector<std::string> kMethods = {
        "split",  "rsplit", "splitlines", "strip",      "lstrip",   "rstrip", "replace",
        "upper",  "lower",  "title",      "capitalize", "format",   "join",   "find",
        "rfind",  "index",  "count",      "startswith", "endswith", "zfill",  "center",
        "ljust",  "rjust",  "partition",  "rpartition", "isdigit",  "items",  "keys",
        "values", "get",    "copy",       "append",     "pop"};
    static const std::vector<std::string> kGlobals = {"range",  "dict",   "namespace",       "cycler",
                                                      "joiner", "lipsum", "raise_exception", "strftime_now"};
    switch (pick(0, 11)) {
      case 0:
      case 1:
        return literal();
      case 2:
        return "(" + expression(depth + 1) + one_of(kBinary) + expression(depth + 1) + ")";
      case 3:
        return one_of(std::vector<std::string>{"not ", "-", "+"}) + expression(depth + 1);
      case 4:
      case 5:
        return expression(depth + 1) + "|" + one_of(kFilters) + (pick(0, 1) ? args(depth) : "");
      case 6:
        return "(" + expression(depth + 1) + " is " + (pick(0, 1) ? "not " : "") + one_of(kTests) + ")";
      case 7:
        return expression(depth + 1) + "." + one_of(kMethods) + args(depth);
      case 8:
        return expression(depth + 1) + "[" + expression(depth + 1) + "]";
      case 9:
        return expression(depth + 1) + "[" + (pick(0, 1) ? expression(depth + 1) : "") + ":" +
               (pick(0, 1) ? expression(depth + 1) : "") + (pick(0, 1) ? ":" + expression(depth + 1) : "") +
               "]";
      case 10:
        return one_of(kGlobals) + args(depth);
      default:
        return "(" + expression(depth + 1) + " if " + expression(depth + 1) + " else " +
               expression(depth + 1) + ")";
    }
  }

  std::string statement(int depth) {
    if (depth > 3) return "{{ " + expression(0) + " }}";
    switch (pick(0, 9)) {
      case 0:
        return "text\n";
      case 1:
      case 2:
        return "{{ " + expression(0) + " }}";
      case 3:
        return "{% if " + expression(0) + " %}" + statement(depth + 1) + "{% else %}" + statement(depth + 1) +
               "{% endif %}";
      case 4:
        return "{% for x in " + expression(0) + " %}" + statement(depth + 1) + "{{ loop.index }}{% endfor %}";
      case 5:
        return "{% set s = " + expression(0) + " %}";
      case 6:
        return "{% set ns.v = " + expression(0) + " %}{{ ns.v }}";
      case 7:
        return "{% macro m(a, b=" + expression(0) + ") %}" + statement(depth + 1) +
               "{{ a }}{% endmacro %}{{ m(" + expression(0) + ") }}";
      case 8:
        return "{% filter " +
               one_of(std::vector<std::string>{"upper", "trim", "indent", "wordwrap(3)", "title"}) + " %}" +
               statement(depth + 1) + "{% endfilter %}";
      default:
        return "{% for x in " + expression(0) +
               " recursive %}{{ x }}{% if x is iterable and x is not string %}"
               "{{ loop(x) }}{% endif %}{% endfor %}";
    }
  }
};

jinja::Limits fuzz_limits() {
  jinja::Limits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_steps = 20'000;
  limits.max_work_bytes = size_t{64} << 20;
  return limits;
}

jinja::Variables fuzz_variables() {
  jinja::Variables vars;
  vars.emplace_back("s", jinja::Value("Hello, wörld! a-b 1 2"));
  vars.emplace_back("l", jinja::Value::from_json(json::parse(R"([3, "x", [1, 2], {"a": 1}, null, 2.5])")));
  vars.emplace_back("d", jinja::Value::from_json(json::parse(R"({"a": 1, "b": "two", "c": [3]})")));
  vars.emplace_back("n", jinja::Value(int64_t{-9223372036854775807 - 1}));
  vars.emplace_back("messages",
                    jinja::Value::from_json(json::parse(
                        R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])")));
  return vars;
}

// Renders (or compiles) one template, failing the test on anything but a clean result or tfm::Error.
void check_one(const std::string& source, const jinja::Variables& vars) {
  SCOPED_TRACE(source);
  const auto start = std::chrono::steady_clock::now();
  try {
    const std::string ns = "{% set ns = namespace(v=0) %}";
    compile_chat_template(ns + source).render(vars, transformers_jinja_environment(), fuzz_limits());
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find("internal error"), std::string::npos) << message;
    EXPECT_EQ(message.find("out of memory"), std::string::npos) << message;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(JinjaFuzz, RandomTemplatesRenderOrFailCleanly) {
  const jinja::Variables vars = fuzz_variables();
  const size_t n = iterations(1500);
  for (size_t i = 0; i < n && !HasFailure(); ++i) check_one(Generator(i).template_text(), vars);
}

TEST(JinjaFuzz, MutatedChatTemplatesRenderOrFailCleanly) {
  std::ifstream in(TFM_SOURCE_DIR "/tests/jinja/templates/llama3.jinja", std::ios::binary);
  const std::string base(std::istreambuf_iterator<char>(in), {});
  ASSERT_FALSE(base.empty());
  jinja::Variables vars = fuzz_variables();
  vars.emplace_back("bos_token", jinja::Value("<s>"));
  static const std::vector<std::string> kInserts = {"{{",
                                                    "}}",
                                                    "{%",
                                                    "%}",
                                                    "(",
                                                    ")",
                                                    "[",
                                                    "]",
                                                    "|",
                                                    "~",
                                                    "-",
                                                    "*",
                                                    "**",
                                                    "not ",
                                                    " if ",
                                                    "else",
                                                    "endif",
                                                    "endfor",
                                                    "9223372036854775807",
                                                    "'",
                                                    "\"",
                                                    "{#",
                                                    ".",
                                                    ",",
                                                    "\\"};
  const size_t n = iterations(1500);
  for (size_t i = 0; i < n && !HasFailure(); ++i) {
    std::mt19937_64 rng(i);
    std::string t = base;
    const int edits = std::uniform_int_distribution<int>(1, 4)(rng);
    for (int e = 0; e < edits && !t.empty(); ++e) {
      const size_t at = std::uniform_int_distribution<size_t>(0, t.size() - 1)(rng);
      switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
        case 0:
          t.erase(at, std::uniform_int_distribution<size_t>(1, 8)(rng));
          break;
        case 1:
          t.insert(at, kInserts[std::uniform_int_distribution<size_t>(0, kInserts.size() - 1)(rng)]);
          break;
        default:
          t[at] = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
      }
    }
    check_one(t, vars);
  }
}

}  // namespace
}  // namespace tfm

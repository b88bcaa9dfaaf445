// A parsed Jinja2 template. Jinja2's language as Transformers' chat templates use it: see docs/jinja.md for
// what is supported.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/jinja/ast.h"
#include "tfm/jinja/context.h"
#include "tfm/jinja/lexer.h"
#include "tfm/jinja/value.h"

namespace tfm::jinja {

using Variables = std::vector<std::pair<std::string, Value>>;

class Template {
 public:
  // Parses the source; a syntax error throws tfm::Error naming the template line.
  explicit Template(std::string_view source, const LexerOptions& options = {});

  // Renders with the given top-level variables over the environment's globals. Errors (undefined values
  // used, type errors, exceeded limits) throw tfm::Error naming the template line.
  std::string render(const Variables& variables, const Environment& env, const Limits& limits = {}) const;

 private:
  Body body_;
};

}  // namespace tfm::jinja

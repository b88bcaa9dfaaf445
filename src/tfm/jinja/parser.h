// Builds the template tree from tokens, following Jinja2's grammar and operator precedence.
#pragma once

#include <vector>

#include "tfm/jinja/ast.h"
#include "tfm/jinja/lexer.h"

namespace tfm::jinja {

// Throws tfm::Error naming the line of the first syntax error.
Body parse(const std::vector<Token>& tokens);

}  // namespace tfm::jinja

// Splits a template into tokens as Jinja2's lexer does: text between tags (with whitespace control already
// applied), tag delimiters, and the names, literals and operators inside tags.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tfm::jinja {

struct LexerOptions {
  bool trim_blocks = false;    // drop the first newline after a block or comment tag
  bool lstrip_blocks = false;  // drop spaces and tabs from a line's start up to a block or comment tag
  bool keep_trailing_newline = false;  // Jinja2 drops one newline at the end of the template by default
};

struct Token {
  enum class Type {
    text,
    variable_begin,
    variable_end,
    block_begin,
    block_end,
    name,
    string,
    integer,
    floating,
    op,
    end
  };
  Type type;
  std::string value;  // text, name, decoded string, number as written (without '_'), or operator
  int line;
};

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options);

}  // namespace tfm::jinja

#include "tfm/jinja/parser.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <set>

#include "tfm/core/error.h"

namespace tfm::jinja {
namespace {

using T = Token::Type;

// Jinja2 (in Python) stops near these; deeper input is a syntax error here rather than a stack overflow.
constexpr int kMaxRecursion = 200;  // statements and bracketed or unary expressions inside one another
constexpr int kMaxHeight = 1000;    // levels of one expression tree (chains like a + b + c nest too)

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Body parse_template() {
    Body body = parse_body({});
    if (cur().type != T::end) fail("unexpected '", cur().value, "'");
    return body;
  }

 private:
  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;

  // One more level of the parser's own recursion while it lives.
  class Nested {
   public:
    Nested(Parser& p, const char* what) : p_(p) {
      if (++p_.depth_ > kMaxRecursion) p_.fail(what, " nested too deeply");
    }
    ~Nested() { --p_.depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;

   private:
    Parser& p_;
  };

  static int height(const ExprPtr& e) { return e ? e->height : 0; }
  static int height(const CallArgs& args) {
    int h = 0;
    for (const auto& e : args.positional) h = std::max(h, e->height);
    for (const auto& [k, e] : args.keyword) h = std::max(h, e->height);
    return h;
  }
  // The node over children of this height.
  template <typename N>
  std::unique_ptr<N> grown(std::unique_ptr<N> node, int children) const {
    node->height = children + 1;
    if (node->height > kMaxHeight) fail("expression nested more than ", kMaxHeight, " levels deep");
    return node;
  }

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  const Token& next() {
    const Token& tok = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return tok;
  }
  bool is_op(std::string_view op) const { return cur().type == T::op && cur().value == op; }
  bool is_name(std::string_view name) const { return cur().type == T::name && cur().value == name; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  template <typename... Parts>
  [[noreturn]] void fail(Parts&&... parts) const {
    throw_error("template syntax error at line ", cur().line, ": ", std::forward<Parts>(parts)...);
  }
  std::string describe(const Token& tok) const {
    switch (tok.type) {
      case T::end:
        return "end of template";
      case T::block_end:
        return "end of statement block";
      case T::variable_end:
        return "end of print statement";
      default:
        return "'" + tok.value + "'";
    }
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '", op, "', got ", describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != T::name) fail("expected a name, got ", describe(cur()));
    return next().value;
  }
  void expect_block_end() {
    if (cur().type != T::block_end) fail("expected end of statement block, got ", describe(cur()));
    next();
  }

  static std::string list(const std::set<std::string_view>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "'" : " or '") + std::string(n) + "'";
    return out;
  }

  // Template text and tags until a block tag whose name is in `ends` (left unconsumed, after its "{%").
  Body parse_body(const std::set<std::string_view>& ends) {
    Body body;
    while (true) {
      const Token& tok = cur();
      if (tok.type == T::end) {
        if (!ends.empty()) fail("unexpected end of template, expected ", list(ends));
        return body;
      }
      if (tok.type == T::text) {
        body.push_back(std::make_unique<TextNode>(tok.line, tok.value));
        next();
      } else if (tok.type == T::variable_begin) {
        next();
        const int line = cur().line;
        auto e = parse_tuple(true);
        if (cur().type != T::variable_end) fail("expected end of print statement, got ", describe(cur()));
        next();
        body.push_back(std::make_unique<OutputNode>(line, std::move(e)));
      } else if (tok.type == T::block_begin) {
        const Token& name = peek();
        if (name.type == T::name && ends.count(name.value)) {
          next();
          return body;
        }
        const bool closing = name.type == T::name && (name.value.rfind("end", 0) == 0 ||
                                                      name.value == "elif" || name.value == "else");
        if (closing) {
          next();
          fail("encountered unknown tag '", name.value, "'", ends.empty() ? "" : ", expected " + list(ends));
        }
        next();
        body.push_back(parse_statement());
      } else {
        fail("unexpected ", describe(tok));
      }
    }
  }

  NodePtr parse_statement() {
    if (cur().type != T::name) fail("tag name expected");
    const Nested nested(*this, "statements");
    const std::string name = cur().value;
    const int line = cur().line;
    next();
    NodePtr node;
    if (name == "if")
      node = parse_if(line);
    else if (name == "for")
      node = parse_for(line);
    else if (name == "set")
      node = parse_set(line);
    else if (name == "macro")
      node = parse_macro(line);
    else if (name == "call")
      node = parse_call_block(line);
    else if (name == "filter")
      node = parse_filter_block(line);
    else if (name == "with")
      node = parse_with(line);
    else if (name == "generation") {
      auto w = std::make_unique<WithNode>(line);
      expect_block_end();
      w->body = parse_end_body("endgeneration");
      node = std::move(w);
    } else if (name == "print") {
      node = std::make_unique<OutputNode>(line, parse_tuple(true));
      expect_block_end();
    } else if (name == "break" || name == "continue") {
      if (loops_ == 0) fail("'", name, "' outside of a loop");
      node =
          std::make_unique<LoopControlNode>(line, name == "break" ? Flow::break_loop : Flow::continue_loop);
      expect_block_end();
    } else {
      fail("encountered unknown tag '", name, "'");
    }
    return node;
  }
  int loops_ = 0;

  // Parses until {% end %} and consumes the end tag.
  Body parse_end_body(std::string_view end) {
    Body b = parse_body({end});
    next();
    expect_block_end();
    return b;
  }

  NodePtr parse_if(int line) {
    auto node = std::make_unique<IfNode>(line);
    auto cond = parse_tuple(false);
    expect_block_end();
    while (true) {
      Body body = parse_body({"elif", "else", "endif"});
      node->branches.emplace_back(std::move(cond), std::move(body));
      const std::string tag = next().value;
      if (tag == "elif") {
        cond = parse_tuple(false);
        expect_block_end();
        continue;
      }
      expect_block_end();
      if (tag == "else") node->otherwise = parse_end_body("endif");
      return node;
    }
  }

  std::vector<Target> parse_targets(bool allow_attribute) {
    std::vector<Target> targets;
    const bool paren = skip_op("(");
    do {
      if (paren && is_op(")")) break;
      Target t{expect_name(), ""};
      if (allow_attribute && skip_op(".")) t.attribute = expect_name();
      targets.push_back(std::move(t));
    } while (skip_op(","));
    if (paren) expect_op(")");
    return targets;
  }

  NodePtr parse_for(int line) {
    auto node = std::make_unique<ForNode>(line);
    node->targets = parse_targets(false);
    if (!skip_name("in")) fail("expected 'in', got ", describe(cur()));
    node->iterable = parse_tuple(false, /*allow_condexpr=*/false);
    if (skip_name("if")) node->filter = parse_expression();
    node->recursive = skip_name("recursive");
    expect_block_end();
    ++loops_;
    node->body = parse_body({"endfor", "else"});
    --loops_;
    if (next().value == "else") {
      expect_block_end();
      node->otherwise = parse_end_body("endfor");
    } else {
      expect_block_end();
    }
    return node;
  }

  NodePtr parse_set(int line) {
    auto targets = parse_targets(true);
    if (skip_op("=")) {
      auto node = std::make_unique<SetNode>(line);
      node->targets = std::move(targets);
      node->value = parse_tuple(false);
      expect_block_end();
      return node;
    }
    if (targets.size() != 1) fail("expected '='");
    auto node = std::make_unique<BlockSetNode>(line);
    node->target = targets[0];
    while (skip_op("|")) node->filters.push_back(parse_filter_call(nullptr));
    expect_block_end();
    node->body = parse_end_body("endset");
    return node;
  }

  void parse_params(std::vector<MacroParam>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      MacroParam p{expect_name(), nullptr};
      if (skip_op("="))
        p.default_value = parse_expression();
      else if (!params.empty() && params.back().default_value)
        fail("non-default argument follows default argument");
      params.push_back(std::move(p));
    }
    next();
  }

  NodePtr parse_macro(int line) {
    auto node = std::make_unique<MacroNode>(line);
    node->name = expect_name();
    parse_params(node->params);
    expect_block_end();
    const int saved = loops_;
    loops_ = 0;
    node->body = parse_end_body("endmacro");
    loops_ = saved;
    return node;
  }

  NodePtr parse_call_block(int line) {
    auto node = std::make_unique<CallBlockNode>(line);
    node->caller.line = line;
    node->caller.name = "caller";
    if (is_op("(")) parse_params(node->caller.params);
    auto e = parse_expression();
    if (!dynamic_cast<CallExpr*>(e.get())) fail("expected call");
    node->call.reset(static_cast<CallExpr*>(e.release()));
    expect_block_end();
    node->caller.body = parse_end_body("endcall");
    return node;
  }

  NodePtr parse_filter_block(int line) {
    auto node = std::make_unique<FilterBlockNode>(line);
    do {
      node->filters.push_back(parse_filter_call(nullptr));
    } while (skip_op("|"));
    expect_block_end();
    node->body = parse_end_body("endfilter");
    return node;
  }

  NodePtr parse_with(int line) {
    auto node = std::make_unique<WithNode>(line);
    while (cur().type != T::block_end) {
      if (!node->assignments.empty()) expect_op(",");
      auto targets = parse_targets(false);
      expect_op("=");
      node->assignments.emplace_back(std::move(targets), parse_expression());
    }
    next();
    node->body = parse_end_body("endwith");
    return node;
  }

  // ---- expressions, lowest precedence first ----

  // a, b (a tuple) or a single expression.
  ExprPtr parse_tuple(bool allow_empty, bool allow_condexpr = true) {
    const int line = cur().line;
    auto parse_one = [&] { return allow_condexpr ? parse_expression() : parse_or(); };
    std::vector<ExprPtr> items;
    bool saw_comma = false;
    while (true) {
      if (!items.empty()) {
        if (!skip_op(",")) break;
        saw_comma = true;
      }
      if (cur().type == T::block_end || cur().type == T::variable_end || is_op(")") ||
          (is_name("if") || is_name("recursive")) || (is_op("=") && !items.empty()))
        break;
      items.push_back(parse_one());
    }
    if (items.empty() && !allow_empty) fail("expected an expression, got ", describe(cur()));
    if (items.empty() && allow_empty) fail("expected an expression, got ", describe(cur()));
    if (!saw_comma) return std::move(items[0]);
    auto list = std::make_unique<ListExpr>(line, true);
    int h = 0;
    for (const auto& e : items) h = std::max(h, e->height);
    list->items = std::move(items);
    return grown(std::move(list), h);
  }

  ExprPtr parse_expression() {
    const Nested nested(*this, "expression");
    return parse_condexpr();
  }

  ExprPtr parse_condexpr() {
    auto expr = parse_or();
    while (is_name("if")) {
      const int line = next().line;
      auto c = std::make_unique<CondExpr>(line);
      c->then = std::move(expr);
      c->condition = parse_or();
      if (skip_name("else")) {
        const Nested nested(*this, "expression");
        c->otherwise = parse_condexpr();
      }
      const int h = std::max({height(c->then), height(c->condition), height(c->otherwise)});
      expr = grown(std::move(c), h);
    }
    return expr;
  }

  ExprPtr binary(int line, const std::string& op, ExprPtr left, ExprPtr right) const {
    const int h = std::max(left->height, right->height);
    return grown(std::make_unique<BinaryExpr>(line, op, std::move(left), std::move(right)), h);
  }

  ExprPtr parse_or() {
    auto left = parse_and();
    while (is_name("or")) {
      const int line = next().line;
      left = binary(line, "or", std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    auto left = parse_not();
    while (is_name("and")) {
      const int line = next().line;
      left = binary(line, "and", std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      const int line = next().line;
      const Nested nested(*this, "expression");
      auto operand = parse_not();
      const int h = operand->height;
      return grown(std::make_unique<UnaryExpr>(line, "not", std::move(operand)), h);
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    auto first = parse_math1();
    auto cmp = std::make_unique<CompareExpr>(line);
    int h = first->height;
    while (true) {
      std::string op;
      if (cur().type == T::op && (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
                                  cur().value == ">" || cur().value == "<=" || cur().value == ">=")) {
        op = next().value;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && peek().type == T::name && peek().value == "in") {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      cmp->rest.emplace_back(op, parse_math1());
      h = std::max(h, cmp->rest.back().second->height);
    }
    if (cmp->rest.empty()) return first;
    cmp->first = std::move(first);
    return grown(std::move(cmp), h);
  }

  ExprPtr parse_math1() {
    auto left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& op = next();
      left = binary(op.line, op.value, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    const int line = cur().line;
    auto first = parse_math2();
    if (!is_op("~")) return first;
    auto concat = std::make_unique<ConcatExpr>(line);
    int h = first->height;
    concat->items.push_back(std::move(first));
    while (skip_op("~")) {
      concat->items.push_back(parse_math2());
      h = std::max(h, concat->items.back()->height);
    }
    return grown(std::move(concat), h);
  }

  ExprPtr parse_math2() {
    auto left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& op = next();
      left = binary(op.line, op.value, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    auto left = parse_unary(true);
    while (is_op("**")) {
      const int line = next().line;
      left = binary(line, "**", std::move(left), parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& op = next();
      const Nested nested(*this, "expression");
      auto operand = parse_unary(false);
      const int h = operand->height;
      node = grown(std::make_unique<UnaryExpr>(op.line, op.value, std::move(operand)), h);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& tok = cur();
    const int line = tok.line;
    switch (tok.type) {
      case T::name: {
        next();
        if (tok.value == "true" || tok.value == "True") return std::make_unique<Literal>(line, Value(true));
        if (tok.value == "false" || tok.value == "False")
          return std::make_unique<Literal>(line, Value(false));
        if (tok.value == "none" || tok.value == "None")
          return std::make_unique<Literal>(line, Value(nullptr));
        return std::make_unique<Name>(line, tok.value);
      }
      case T::string: {
        std::string s = next().value;
        while (cur().type == T::string) s += next().value;  // adjacent literals join, as in Python
        return std::make_unique<Literal>(line, Value(std::move(s)));
      }
      case T::integer:
        return std::make_unique<Literal>(line, integer_literal(next()));
      case T::floating:
        next();
        return std::make_unique<Literal>(line, Value(std::strtod(tok.value.c_str(), nullptr)));
      case T::op:
        if (tok.value == "(") {
          next();
          if (skip_op(")")) return std::make_unique<ListExpr>(line, true);
          auto e = parse_tuple(false);
          expect_op(")");
          return e;
        }
        if (tok.value == "[") {
          next();
          auto list = std::make_unique<ListExpr>(line, false);
          int h = 0;
          while (!is_op("]")) {
            if (!list->items.empty()) {
              expect_op(",");
              if (is_op("]")) break;
            }
            list->items.push_back(parse_expression());
            h = std::max(h, list->items.back()->height);
          }
          next();
          return grown(std::move(list), h);
        }
        if (tok.value == "{") {
          next();
          auto dict = std::make_unique<DictExpr>(line);
          int h = 0;
          while (!is_op("}")) {
            if (!dict->items.empty()) {
              expect_op(",");
              if (is_op("}")) break;
            }
            auto key = parse_expression();
            expect_op(":");
            dict->items.emplace_back(std::move(key), parse_expression());
            h = std::max({h, dict->items.back().first->height, dict->items.back().second->height});
          }
          next();
          return grown(std::move(dict), h);
        }
        break;
      default:
        break;
    }
    fail("unexpected ", describe(tok));
  }

  Value integer_literal(const Token& tok) const {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(tok.value.data(), tok.value.data() + tok.value.size(), v);
    if (ec != std::errc()) fail("integer literal ", tok.value, " is too large (tfm's integers have 64 bits)");
    return v;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("["))
        node = parse_subscript(std::move(node));
      else if (is_op("("))
        node = parse_call(std::move(node));
      else
        return node;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        node = parse_filter_call(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& tok = next();
    const int h = node->height;
    if (tok.value == ".") {
      if (cur().type == T::name)
        return grown(std::make_unique<GetAttr>(tok.line, std::move(node), next().value), h);
      if (cur().type == T::integer) {
        auto index = std::make_unique<Literal>(tok.line, integer_literal(next()));
        return grown(std::make_unique<GetItem>(tok.line, std::move(node), std::move(index)), h);
      }
      fail("expected name or number");
    }
    // '[': an index, a slice, or a tuple of them (the last is not used by templates and not supported).
    ExprPtr parts[3];
    int colons = 0;
    while (!is_op("]")) {
      if (skip_op(":")) {
        if (++colons > 2) fail("too many ':' in a slice");
        continue;
      }
      if (parts[colons]) fail("expected ']' or ':', got ", describe(cur()));
      parts[colons] = parse_expression();
    }
    next();
    const int parts_height = std::max({h, height(parts[0]), height(parts[1]), height(parts[2])});
    if (colons == 0) {
      if (!parts[0]) fail("expected an index");
      return grown(std::make_unique<GetItem>(tok.line, std::move(node), std::move(parts[0])), parts_height);
    }
    auto slice = std::make_unique<SliceExpr>(tok.line);
    slice->object = std::move(node);
    slice->start = std::move(parts[0]);
    slice->stop = std::move(parts[1]);
    slice->step = std::move(parts[2]);
    return grown(std::move(slice), parts_height);
  }

  void parse_call_args(CallArgs& args) {
    expect_op("(");
    while (!is_op(")")) {
      if (!args.positional.empty() || !args.keyword.empty()) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (cur().type == T::name && peek().type == T::op && peek().value == "=") {
        std::string key = next().value;
        next();
        args.keyword.emplace_back(std::move(key), parse_expression());
      } else {
        if (!args.keyword.empty()) fail("positional argument follows keyword argument");
        args.positional.push_back(parse_expression());
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto call = std::make_unique<CallExpr>(cur().line, std::move(callee));
    parse_call_args(call->args);
    const int h = std::max(call->callee->height, height(call->args));
    return grown(std::move(call), h);
  }

  std::unique_ptr<FilterExpr> parse_filter_call(ExprPtr subject) {
    const int line = cur().line;
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    auto f = std::make_unique<FilterExpr>(line, std::move(subject), std::move(name));
    if (is_op("(")) parse_call_args(f->args);
    const int h = std::max(height(f->subject), height(f->args));
    return grown(std::move(f), h);
  }

  ExprPtr parse_test(ExprPtr subject) {
    const int line = next().line;  // "is"
    const bool negated = skip_name("not");
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    auto test = std::make_unique<TestExpr>(line, std::move(subject), std::move(name));
    test->negated = negated;
    if (is_op("(")) {
      parse_call_args(test->args);
    } else if ((cur().type == T::name || cur().type == T::string || cur().type == T::integer ||
                cur().type == T::floating || is_op("[") || is_op("{") || is_op("(")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("you cannot chain multiple tests with is");
      test->args.positional.push_back(parse_postfix(parse_primary()));
    }
    const int h = std::max(test->subject->height, height(test->args));
    return grown(std::move(test), h);
  }
};

}  // namespace

Body parse(const std::vector<Token>& tokens) {
  return Parser(tokens).parse_template();
}

}  // namespace tfm::jinja

// The template tree: expressions evaluate to values, nodes render text. Each remembers its template line, and
// errors raised below a node are reported with the line of the innermost node (Node::render does this).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tfm/jinja/context.h"
#include "tfm/jinja/value.h"

namespace tfm::jinja {

struct Expr {
  explicit Expr(int line) : line(line) {}
  virtual ~Expr() = default;
  Value evaluate(Context& ctx) const;  // counts the level against Limits::max_nesting
  virtual Value do_evaluate(Context& ctx) const = 0;
  int line;
  // Levels of expressions in this tree, this one included: the parser bounds it, so that evaluating and
  // destroying the tree recurse within the stack.
  int height = 1;
};
using ExprPtr = std::unique_ptr<Expr>;

struct CallArgs {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  Args evaluate(Context& ctx) const;
};

struct Literal : Expr {
  Literal(int line, Value v) : Expr(line), value(std::move(v)) {}
  Value do_evaluate(Context&) const override { return value; }
  Value value;
};
struct Name : Expr {
  Name(int line, std::string n) : Expr(line), name(std::move(n)) {}
  Value do_evaluate(Context& ctx) const override;
  std::string name;
};
struct ListExpr : Expr {  // [a, b] or (a, b)
  ListExpr(int line, bool tuple) : Expr(line), tuple(tuple) {}
  Value do_evaluate(Context& ctx) const override;
  std::vector<ExprPtr> items;
  bool tuple;
};
struct DictExpr : Expr {
  using Expr::Expr;
  Value do_evaluate(Context& ctx) const override;
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};
struct GetAttr : Expr {  // obj.name
  GetAttr(int line, ExprPtr o, std::string n) : Expr(line), object(std::move(o)), name(std::move(n)) {}
  Value do_evaluate(Context& ctx) const override;
  ExprPtr object;
  std::string name;
};
struct GetItem : Expr {  // obj[index]
  GetItem(int line, ExprPtr o, ExprPtr i) : Expr(line), object(std::move(o)), index(std::move(i)) {}
  Value do_evaluate(Context& ctx) const override;
  ExprPtr object, index;
};
struct SliceExpr : Expr {  // obj[start:stop:step], each part optional
  using Expr::Expr;
  Value do_evaluate(Context& ctx) const override;
  ExprPtr object, start, stop, step;
};
struct CallExpr : Expr {
  CallExpr(int line, ExprPtr c) : Expr(line), callee(std::move(c)) {}
  Value do_evaluate(Context& ctx) const override;
  ExprPtr callee;
  CallArgs args;
};
struct FilterExpr : Expr {  // subject | name(args); the subject is absent in a filter block's chain
  FilterExpr(int line, ExprPtr s, std::string n) : Expr(line), subject(std::move(s)), name(std::move(n)) {}
  Value do_evaluate(Context& ctx) const override;
  Value apply(Context& ctx, const Value& subject) const;
  ExprPtr subject;
  std::string name;
  CallArgs args;
};
struct TestExpr : Expr {  // subject is [not] name(args)
  TestExpr(int line, ExprPtr s, std::string n) : Expr(line), subject(std::move(s)), name(std::move(n)) {}
  Value do_evaluate(Context& ctx) const override;
  ExprPtr subject;
  std::string name;
  CallArgs args;
  bool negated = false;
};
struct UnaryExpr : Expr {  // not, -, +
  UnaryExpr(int line, std::string o, ExprPtr e) : Expr(line), op(std::move(o)), operand(std::move(e)) {}
  Value do_evaluate(Context& ctx) const override;
  std::string op;
  ExprPtr operand;
};
struct BinaryExpr : Expr {  // arithmetic, and, or
  BinaryExpr(int line, std::string o, ExprPtr l, ExprPtr r)
      : Expr(line), op(std::move(o)), left(std::move(l)), right(std::move(r)) {}
  Value do_evaluate(Context& ctx) const override;
  std::string op;
  ExprPtr left, right;
};
struct ConcatExpr : Expr {  // a ~ b ~ c: one node however long, as in Jinja2
  using Expr::Expr;
  Value do_evaluate(Context& ctx) const override;
  std::vector<ExprPtr> items;
};
struct CompareExpr : Expr {  // a < b <= c, ==, !=, in, not in
  using Expr::Expr;
  Value do_evaluate(Context& ctx) const override;
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;
};
struct CondExpr : Expr {  // then if condition else otherwise
  using Expr::Expr;
  Value do_evaluate(Context& ctx) const override;
  ExprPtr condition, then, otherwise;  // otherwise may be absent: undefined
};

// Whether rendering goes on, or a {% break %} / {% continue %} unwinds to the innermost loop.
enum class Flow { normal, break_loop, continue_loop };

struct Node {
  explicit Node(int line) : line(line) {}
  virtual ~Node() = default;
  Flow render(Context& ctx, std::string& out) const;  // adds "line N" to errors raised below
  virtual Flow do_render(Context& ctx, std::string& out) const = 0;
  int line;
};
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;
Flow render_body(const Body& body, Context& ctx, std::string& out);

struct TextNode : Node {
  TextNode(int line, std::string t) : Node(line), text(std::move(t)) {}
  Flow do_render(Context& ctx, std::string& out) const override;
  std::string text;
};
struct OutputNode : Node {  // {{ expr }}
  OutputNode(int line, ExprPtr e) : Node(line), expr(std::move(e)) {}
  Flow do_render(Context& ctx, std::string& out) const override;
  ExprPtr expr;
};
struct IfNode : Node {
  using Node::Node;
  Flow do_render(Context& ctx, std::string& out) const override;
  std::vector<std::pair<ExprPtr, Body>> branches;  // if and elifs
  Body otherwise;
};
// A name to assign: "x", or "ns.attr" (a namespace attribute).
struct Target {
  std::string name;
  std::string attribute;
};
void assign(Context& ctx, const std::vector<Target>& targets, const Value& value, int line);

struct ForNode : Node {
  using Node::Node;
  Flow do_render(Context& ctx, std::string& out) const override;
  // One run of the loop over `seq`; a recursive loop's loop(children) runs it again one level deeper.
  Flow run(Context& ctx, const Value& seq, int depth, std::string& out) const;
  std::vector<Target> targets;
  ExprPtr iterable, filter;
  Body body, otherwise;
  bool recursive = false;
};
struct SetNode : Node {  // {% set a, b = expr %}
  using Node::Node;
  Flow do_render(Context& ctx, std::string& out) const override;
  std::vector<Target> targets;
  ExprPtr value;
};
struct BlockSetNode : Node {  // {% set x | filters %}...{% endset %}
  using Node::Node;
  Flow do_render(Context& ctx, std::string& out) const override;
  Target target;
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
};
struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be absent
};
struct MacroNode : Node {  // {% macro name(params) %}; also the anonymous caller of a call block
  using Node::Node;
  Flow do_render(Context& ctx, std::string& out) const override;
  Value make_macro(Context& ctx, const Value& caller) const;
  std::string name;
  std::vector<MacroParam> params;
  Body body;
};
struct CallBlockNode : Node {  // {% call(params) macro(args) %}body{% endcall %}
  using Node::Node;
  Flow do_render(Context& ctx, std::string& out) const override;
  std::unique_ptr<CallExpr> call;
  MacroNode caller{0};
};
struct FilterBlockNode : Node {  // {% filter f | g %}...{% endfilter %}
  using Node::Node;
  Flow do_render(Context& ctx, std::string& out) const override;
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
};
struct WithNode : Node {  // {% with a = 1 %}...{% endwith %}; also {% generation %} (no assignments)
  using Node::Node;
  Flow do_render(Context& ctx, std::string& out) const override;
  std::vector<std::pair<std::vector<Target>, ExprPtr>> assignments;
  Body body;
};
struct LoopControlNode : Node {  // {% break %} / {% continue %}
  LoopControlNode(int line, Flow f) : Node(line), flow(f) {}
  Flow do_render(Context&, std::string&) const override { return flow; }
  Flow flow;
};

}  // namespace tfm::jinja

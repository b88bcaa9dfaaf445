// Evaluation of expressions and rendering of nodes, with Python's semantics for operators.
#include <new>
#include <optional>

#include "tfm/core/error.h"
#include "tfm/jinja/ast.h"
#include "tfm/jinja/builtins.h"
#include "tfm/jinja/parser.h"
#include "tfm/jinja/template.h"

namespace tfm::jinja {
namespace {

// An error that already names its template line, so outer nodes pass it on unchanged.
class LocatedError : public Error {
 public:
  using Error::Error;
};

void require_defined(const Value& v) {
  if (v.is_undefined()) v.fail_undefined();
}

std::optional<int64_t> slice_part(Context& ctx, const ExprPtr& e) {
  if (!e) return std::nullopt;
  const Value v = e->evaluate(ctx);
  if (v.is_none()) return std::nullopt;
  if (!v.is_number() || v.is_float())
    throw_error("slice indices must be integers or None, not ", v.type_name());
  return v.as_int();
}

// The `loop` variable of one iteration: a callable (loop(children) in a recursive loop) with attributes.
Value make_loop(size_t i, const std::vector<Value>& items, int depth, Function recurse,
                const std::shared_ptr<std::optional<Value>>& last_changed) {
  const auto n = static_cast<int64_t>(items.size());
  const auto k = static_cast<int64_t>(i);
  const Value cycle = Value::callable("cycle", [k](Context&, Args& args) -> Value {
    if (args.positional.empty()) throw_error("no items for cycling given");
    return args.positional[static_cast<size_t>(k) % args.positional.size()];
  });
  const Value changed = Value::callable("changed", [last_changed](Context&, Args& args) -> Value {
    Value now(args.positional);
    if (*last_changed && **last_changed == now) return false;
    *last_changed = std::move(now);
    return true;
  });
  auto attributes = std::make_shared<DictData>();
  attributes->items = {
      {"index", k + 1},
      {"index0", k},
      {"revindex", n - k},
      {"revindex0", n - k - 1},
      {"first", k == 0},
      {"last", k == n - 1},
      {"length", n},
      {"depth", depth},
      {"depth0", depth - 1},
      {"previtem", k > 0 ? items[i - 1] : Value::undefined("there is no previous item")},
      {"nextitem", k + 1 < n ? items[i + 1] : Value::undefined("there is no next item")},
      {"cycle", cycle},
      {"changed", changed},
  };
  return Value::callable("loop", std::move(recurse), std::move(attributes));
}

}  // namespace

// ---- expressions ----

Value Expr::evaluate(Context& ctx) const {
  const NestingGuard guard(ctx.nesting, ctx.limits.max_nesting, "expressions, statements and calls");
  return do_evaluate(ctx);
}

Args CallArgs::evaluate(Context& ctx) const {
  Args args;
  for (const auto& e : positional) args.positional.push_back(e->evaluate(ctx));
  for (const auto& [k, e] : keyword) args.keyword.emplace_back(k, e->evaluate(ctx));
  return args;
}

Value Name::do_evaluate(Context& ctx) const {
  return ctx.lookup(name);
}

Value ListExpr::do_evaluate(Context& ctx) const {
  std::vector<Value> out;
  out.reserve(items.size());
  for (const auto& e : items) out.push_back(e->evaluate(ctx));
  return Value(std::move(out), tuple);
}

Value DictExpr::do_evaluate(Context& ctx) const {
  Value d = make_dict();
  for (const auto& [k, v] : items) {
    Value key = k->evaluate(ctx);
    if (key.is_list() && !key.is_tuple()) throw_error("unhashable type: 'list'");
    if (key.is_dict()) throw_error("unhashable type: 'dict'");
    d.mutable_dict().set(std::move(key), v->evaluate(ctx));
  }
  return d;
}

Value GetAttr::do_evaluate(Context& ctx) const {
  return get_attribute(object->evaluate(ctx), name);
}

Value GetItem::do_evaluate(Context& ctx) const {
  const Value obj = object->evaluate(ctx);
  return get_item(ctx, obj, index->evaluate(ctx));
}

Value SliceExpr::do_evaluate(Context& ctx) const {
  const Value obj = object->evaluate(ctx);
  const auto b = slice_part(ctx, start), e = slice_part(ctx, stop), st = slice_part(ctx, step);
  return slice(ctx, obj, b, e, st);
}

Value CallExpr::do_evaluate(Context& ctx) const {
  const Value f = callee->evaluate(ctx);
  Args a = args.evaluate(ctx);
  return ctx.call(f, a);
}

Value FilterExpr::apply(Context& ctx, const Value& value) const {
  Args a = args.evaluate(ctx);
  return ctx.call_filter(name, value, a);
}

Value FilterExpr::do_evaluate(Context& ctx) const {
  return apply(ctx, subject->evaluate(ctx));
}

Value TestExpr::do_evaluate(Context& ctx) const {
  const Value v = subject->evaluate(ctx);
  Args a = args.evaluate(ctx);
  return ctx.call_test(name, v, a) != negated;
}

Value UnaryExpr::do_evaluate(Context& ctx) const {
  const Value v = operand->evaluate(ctx);
  if (op == "not") return !v.truthy();
  require_defined(v);
  if (!v.is_number()) throw_error("bad operand type for unary ", op, ": '", v.type_name(), "'");
  if (op == "+") return v.is_float() ? v : Value(v.as_int());
  if (v.is_float()) return -v.as_double();
  return int_sub(0, v.as_int());
}

Value BinaryExpr::do_evaluate(Context& ctx) const {
  Value l = left->evaluate(ctx);
  if (op == "and") return l.truthy() ? right->evaluate(ctx) : l;
  if (op == "or") return l.truthy() ? l : right->evaluate(ctx);
  return binary_op(ctx, op, l, right->evaluate(ctx));
}

Value ConcatExpr::do_evaluate(Context& ctx) const {
  std::string out;
  for (const auto& e : items) ctx.append(out, e->evaluate(ctx).str());
  return out;
}

Value CompareExpr::do_evaluate(Context& ctx) const {
  Value a = first->evaluate(ctx);
  for (const auto& [op, e] : rest) {
    Value b = e->evaluate(ctx);
    bool ok;
    if (op == "==")
      ok = a == b;
    else if (op == "!=")
      ok = !(a == b);
    else if (op == "<")
      ok = a.less(b);
    else if (op == ">")
      ok = b.less(a);
    else if (op == "<=")
      ok = a.less(b) || a == b;
    else if (op == ">=")
      ok = b.less(a) || a == b;
    else if (op == "in")
      ok = contains(ctx, b, a);
    else
      ok = !contains(ctx, b, a);
    if (!ok) return false;
    a = std::move(b);
  }
  return true;
}

Value CondExpr::do_evaluate(Context& ctx) const {
  if (condition->evaluate(ctx).truthy()) return then->evaluate(ctx);
  if (otherwise) return otherwise->evaluate(ctx);
  return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
}

// ---- nodes ----

Flow Node::render(Context& ctx, std::string& out) const {
  try {
    const NestingGuard guard(ctx.nesting, ctx.limits.max_nesting, "expressions, statements and calls");
    return do_render(ctx, out);
  } catch (const LocatedError&) {
    throw;
  } catch (const Error& e) {
    throw LocatedError("template line " + std::to_string(line) + ": " + e.what());
  }
}

Flow render_body(const Body& body, Context& ctx, std::string& out) {
  for (const auto& node : body) {
    const Flow f = node->render(ctx, out);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

Flow TextNode::do_render(Context& ctx, std::string& out) const {
  ctx.append(out, text);
  return Flow::normal;
}

Flow OutputNode::do_render(Context& ctx, std::string& out) const {
  ctx.append(out, expr->evaluate(ctx).str());
  return Flow::normal;
}

Flow IfNode::do_render(Context& ctx, std::string& out) const {
  for (const auto& [cond, body] : branches)
    if (cond->evaluate(ctx).truthy()) return render_body(body, ctx, out);
  return render_body(otherwise, ctx, out);
}

void assign(Context& ctx, const std::vector<Target>& targets, const Value& value, int line) {
  (void)line;
  if (targets.size() == 1) {
    const Target& t = targets[0];
    if (t.attribute.empty()) {
      ctx.scope->set(t.name, value);
      return;
    }
    const Value ns = ctx.lookup(t.name);
    if (!ns.is_namespace()) throw_error("cannot assign attribute on non-namespace object");
    ns.mutable_dict().set(Value(t.attribute), value);
    return;
  }
  require_defined(value);
  const std::vector<Value> parts = ctx.iterate(value);
  if (parts.size() > targets.size()) throw_error("too many values to unpack (expected ", targets.size(), ")");
  if (parts.size() < targets.size())
    throw_error("not enough values to unpack (expected ", targets.size(), ", got ", parts.size(), ")");
  for (size_t i = 0; i < parts.size(); ++i) assign(ctx, {targets[i]}, parts[i], line);
}

Flow ForNode::do_render(Context& ctx, std::string& out) const {
  return run(ctx, iterable->evaluate(ctx), 1, out);
}

Flow ForNode::run(Context& ctx, const Value& seq, int depth, std::string& out) const {
  std::vector<Value> items = ctx.iterate(seq);
  if (filter) {
    std::vector<Value> kept;
    for (const auto& item : items) {
      ScopeGuard guard(ctx, std::make_shared<Scope>(ctx.scope));
      assign(ctx, targets, item, line);
      ctx.step();
      if (filter->evaluate(ctx).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    ScopeGuard guard(ctx, std::make_shared<Scope>(ctx.scope));
    return render_body(otherwise, ctx, out);
  }
  Function recurse = [this, depth](Context& c, Args& args) -> Value {
    if (!recursive) throw_error("The loop must have the 'recursive' marker to be called recursively.");
    if (args.positional.size() != 1) throw_error("loop() takes exactly one argument");
    const NestingGuard depth_guard(c.depth, c.limits.max_depth, "recursive loop() calls");
    std::string text;
    run(c, args.positional[0], depth + 1, text);
    return text;
  };
  const auto last_changed = std::make_shared<std::optional<Value>>();
  for (size_t i = 0; i < items.size(); ++i) {
    ctx.step();
    ScopeGuard guard(ctx, std::make_shared<Scope>(ctx.scope));
    ctx.scope->set("loop", make_loop(i, items, depth, recurse, last_changed));
    assign(ctx, targets, items[i], line);
    if (render_body(body, ctx, out) == Flow::break_loop) break;
  }
  return Flow::normal;
}

Flow SetNode::do_render(Context& ctx, std::string&) const {
  assign(ctx, targets, value->evaluate(ctx), line);
  return Flow::normal;
}

Flow BlockSetNode::do_render(Context& ctx, std::string&) const {
  std::string text;
  render_body(body, ctx, text);
  Value v(std::move(text));
  for (const auto& f : filters) v = f->apply(ctx, v);
  assign(ctx, {target}, v, line);
  return Flow::normal;
}

Value MacroNode::make_macro(Context& ctx, const Value& caller) const {
  std::shared_ptr<Scope> closure = ctx.scope;
  ctx.macro_scopes.push_back(closure);
  return Value::callable(name, [this, closure, caller](Context& c, Args& args) -> Value {
    const NestingGuard depth_guard(c.depth, c.limits.max_depth, "macro calls");
    ScopeGuard guard(c, std::make_shared<Scope>(closure));
    std::vector<Value> varargs;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < params.size())
        c.scope->set(params[i].name, args.positional[i]);
      else
        varargs.push_back(args.positional[i]);
    }
    Value kwargs = make_dict();
    std::vector<bool> given(params.size());
    for (size_t i = 0; i < params.size() && i < args.positional.size(); ++i) given[i] = true;
    if (!caller.is_undefined()) c.scope->set("caller", caller);
    for (auto& [k, v] : args.keyword) {
      size_t p = 0;
      while (p < params.size() && params[p].name != k) ++p;
      if (p < params.size()) {
        if (given[p]) throw_error("macro '", name, "' got multiple values for argument '", k, "'");
        given[p] = true;
        c.scope->set(k, v);
      } else if (k == "caller") {
        c.scope->set("caller", v);
      } else {
        kwargs.mutable_dict().set(Value(k), v);
      }
    }
    for (size_t p = 0; p < params.size(); ++p) {
      if (given[p]) continue;
      c.scope->set(params[p].name, params[p].default_value ? params[p].default_value->evaluate(c)
                                                           : Value::undefined("parameter '" + params[p].name +
                                                                              "' was not provided"));
    }
    c.scope->set("varargs", Value(std::move(varargs), /*tuple=*/true));
    c.scope->set("kwargs", kwargs);
    std::string out;
    render_body(body, c, out);
    return out;
  });
}

Flow MacroNode::do_render(Context& ctx, std::string&) const {
  ctx.scope->set(name, make_macro(ctx, Value()));
  return Flow::normal;
}

Flow CallBlockNode::do_render(Context& ctx, std::string& out) const {
  const Value f = call->callee->evaluate(ctx);
  Args a = call->args.evaluate(ctx);
  a.keyword.emplace_back("caller", caller.make_macro(ctx, Value()));
  ctx.append(out, ctx.call(f, a).str());
  return Flow::normal;
}

Flow FilterBlockNode::do_render(Context& ctx, std::string& out) const {
  std::string text;
  const Flow flow = render_body(body, ctx, text);
  Value v(std::move(text));
  for (const auto& f : filters) v = f->apply(ctx, v);
  ctx.append(out, v.str());
  return flow;
}

Flow WithNode::do_render(Context& ctx, std::string& out) const {
  std::vector<std::pair<const std::vector<Target>*, Value>> values;
  for (const auto& [targets, e] : assignments) values.emplace_back(&targets, e->evaluate(ctx));
  ScopeGuard guard(ctx, std::make_shared<Scope>(ctx.scope));
  for (const auto& [targets, v] : values) assign(ctx, *targets, v, line);
  return render_body(body, ctx, out);
}

// ---- template ----

namespace {

// The entry points promise tfm::Error alone; anything else thrown below is a defect of the interpreter, and
// says so rather than escaping as another type.
template <typename F>
auto only_errors(F&& f) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error("the template ran out of memory");
  } catch (const std::exception& e) {
    throw_error("internal error of the template interpreter: ", e.what());
  }
}

}  // namespace

Template::Template(std::string_view source, const LexerOptions& options)
    : body_(only_errors([&] { return parse(tokenize(source, options)); })) {}

std::string Template::render(const Variables& variables, const Environment& env, const Limits& limits) const {
  return only_errors([&] {
    auto top = std::make_shared<Scope>();
    for (const auto& [k, v] : variables) top->set(k, v);
    Context ctx(env, top, limits);
    std::string out;
    render_body(body_, ctx, out);
    return out;
  });
}

}  // namespace tfm::jinja

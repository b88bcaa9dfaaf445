#include "tfm/jinja/context.h"

#include "tfm/core/error.h"
#include "tfm/core/stack.h"

namespace tfm::jinja {

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent_.get())
    for (const auto& [k, v] : s->vars_)
      if (k == name) return &v;
  return nullptr;
}

void Scope::set(const std::string& name, Value value) {
  for (auto& [k, v] : vars_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars_.emplace_back(name, std::move(value));
}

namespace {
thread_local Context* active_context = nullptr;
}

Context::Context(const Environment& env, std::shared_ptr<Scope> scope, Limits limits)
    : env(env), scope(std::move(scope)), limits(limits), previous_active_(active_context) {
  active_context = this;
}

Context::~Context() {
  active_context = previous_active_;
  for (auto& s : macro_scopes) s->clear();
  for (auto& ns : namespaces) ns.mutable_dict().items.clear();
}

Context* Context::active() {
  return active_context;
}

NestingGuard::NestingGuard(size_t& level, size_t max, const char* what) : level_(level) {
  if (level_ >= max) throw_error(what, " nested more than ", max, " deep");
  if (!stack_space_left())
    throw_error(what, " nested more than ", level_, " deep, as deep as the stack allows");
  ++level_;
}

Value Context::lookup(std::string_view name) const {
  if (const Value* v = scope->find(name)) return *v;
  auto it = env.globals.find(name);
  if (it != env.globals.end()) return it->second;
  return Value::undefined("'" + std::string(name) + "' is undefined");
}

void Context::step() {
  if (++steps > limits.max_steps)
    throw_error("the template ran more than ", limits.max_steps, " steps (an endless loop?)");
}

void Context::check_size(size_t bytes) const {
  if (bytes > limits.max_output_bytes)
    throw_error("the template built a value of ", bytes, " bytes, over the limit of ",
                limits.max_output_bytes);
}

void Context::work(size_t bytes) {
  work_bytes += bytes;
  if (work_bytes > limits.max_work_bytes)
    throw_error("the template copied, scanned or compared more than ", limits.max_work_bytes,
                " bytes (an endless loop?)");
}

void Context::append(std::string& out, std::string_view text) {
  check_size(out.size() + text.size());
  work(text.size());
  out += text;
}

std::vector<Value> Context::iterate(const Value& v) {
  const size_t n = v.is_string() ? utf8_length(v.as_string())
                   : v.is_list() ? v.items().size()
                   : v.is_dict() ? v.dict().items.size()
                                 : 0;
  build(n * sizeof(Value));
  return v.iterate();
}

Value Context::call_filter(const std::string& name, const Value& subject, Args& args) {
  auto it = env.filters.find(name);
  if (it == env.filters.end()) throw_error("no filter named '", name, "'");
  step();
  return it->second(*this, subject, args);
}

bool Context::call_test(const std::string& name, const Value& subject, Args& args) {
  auto it = env.tests.find(name);
  if (it == env.tests.end()) throw_error("no test named '", name, "'");
  step();
  return it->second(*this, subject, args);
}

Value Context::call(const Value& callee, Args& args) {
  if (callee.is_undefined()) callee.fail_undefined();
  if (!callee.is_callable()) throw_error("'", callee.type_name(), "' object is not callable");
  step();
  return callee.callable_data().function(*this, args);
}

}  // namespace tfm::jinja

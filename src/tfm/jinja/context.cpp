#include "tfm/jinja/context.h"

#include "tfm/core/error.h"

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

Context::~Context() {
  for (auto& s : macro_scopes) s->clear();
  for (auto& ns : namespaces) ns.mutable_dict().items.clear();
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

// Where names are looked up while a template renders: a chain of scopes (a for-loop iteration, a macro
// call, the template's top level) ending in the environment's globals, plus the run's limits.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tfm/jinja/value.h"

namespace tfm::jinja {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
  void clear() { vars_.clear(); }
  const std::shared_ptr<Scope>& parent() const { return parent_; }

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;  // few per scope: a linear search is fastest
};

using Filter = std::function<Value(Context&, const Value& subject, Args& args)>;
using Test = std::function<bool(Context&, const Value& subject, Args& args)>;

// What a template may call: filters, tests and global values (functions among them).
struct Environment {
  std::unordered_map<std::string, Filter> filters;
  std::unordered_map<std::string, Test> tests;
  std::map<std::string, Value, std::less<>> globals;

  // Jinja2's default filters, tests and globals (range, dict, namespace, cycler, joiner, lipsum).
  static Environment jinja2_defaults();
};

// Bounds that keep a hostile template from running forever, filling memory or overflowing the stack.
struct Limits {
  size_t max_output_bytes = size_t{64}
                            << 20;  // also caps each string or list built (elements as sizeof(Value))
  size_t max_steps = 2'000'000;     // loop iterations, calls and filter applications
  size_t max_depth = 256;           // nested macro calls and recursive loop() calls
  // Expressions, statements and calls evaluated inside one another; each level is a few C++ stack frames.
  size_t max_nesting = 1500;
  // Bytes copied, scanned or compared (an element visited counts as 64): each operation is bounded by the
  // size limit, but a loop may repeat one two million times.
  size_t max_work_bytes = size_t{4} << 30;
};
class Context {
 public:
  Context(const Environment& env, std::shared_ptr<Scope> scope, Limits limits);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // The render running on this thread, which walks over values charge their work to; null outside one.
  static Context* active();

  const Environment& env;
  std::shared_ptr<Scope> scope;  // innermost
  Limits limits;
  size_t steps = 0;
  size_t depth = 0;    // against max_depth
  size_t nesting = 0;  // against max_nesting
  size_t work_bytes = 0;

  // Macros hold their defining scope and scopes hold macros; namespaces may hold themselves. Both are
  // registered here and emptied when the render ends, so these reference cycles never leak.
  std::vector<std::shared_ptr<Scope>> macro_scopes;
  std::vector<Value> namespaces;

  Value lookup(std::string_view name) const;
  void step();                          // counts one unit of work against max_steps
  void check_size(size_t bytes) const;  // a value about to be built of this size
  void work(size_t bytes);              // counts bytes copied, scanned or compared against max_work_bytes
  void build(size_t bytes) {            // a value about to be built: its size is checked and its copy counted
    check_size(bytes);
    work(bytes);
  }
  void append(std::string& out, std::string_view text);  // out += text, within the size limit
  // The elements of a value as a for loop sees them, built within the size limit.
  std::vector<Value> iterate(const Value& v);
  Value call_filter(const std::string& name, const Value& subject, Args& args);
  bool call_test(const std::string& name, const Value& subject, Args& args);
  Value call(const Value& callee, Args& args);

 private:
  Context* previous_active_;
};

// One more level of a nesting that is bounded (the C++ stack grows with it): counts `level` up while it
// lives, and throws "<what> nested more than <max> deep" beyond `max`, or sooner where the thread's stack
// is nearly used up (see core/stack.h).
class NestingGuard {
 public:
  NestingGuard(size_t& level, size_t max, const char* what);
  ~NestingGuard() { --level_; }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;

 private:
  size_t& level_;
};

// Runs a body in a child scope and restores the scope after, even when it throws.
class ScopeGuard {
 public:
  ScopeGuard(Context& ctx, std::shared_ptr<Scope> scope) : ctx_(ctx), saved_(std::move(ctx.scope)) {
    ctx.scope = std::move(scope);
  }
  ~ScopeGuard() { ctx_.scope = std::move(saved_); }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  Context& ctx_;
  std::shared_ptr<Scope> saved_;
};

}  // namespace tfm::jinja

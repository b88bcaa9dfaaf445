#include "tfm/core/logging.h"

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>

#include "tfm/core/error.h"

namespace tfm::logging {
namespace {

constexpr Level kLevels[] = {Level::debug, Level::info, Level::warning, Level::error, Level::critical};
// What TRANSFORMERS_VERBOSITY accepts; "detail" is Transformers' debug with file and line, which tfm's
// messages do not carry.
constexpr std::string_view kLevelNames = "detail, debug, info, warning, error, critical";

struct State {
  std::mutex mutex;
  Handler handler = [](Level level, const std::string& message) {
    std::cerr << level_name(level) << ": " << message << "\n";
  };
  std::set<std::string> logged_once;
  std::atomic<Level> verbosity{Level::warning};
  std::string unknown_verbosity;  // an unreadable TRANSFORMERS_VERBOSITY, reported once the state exists

  State() {
    const char* env = std::getenv("TRANSFORMERS_VERBOSITY");
    if (!env || !*env) return;
    try {
      verbosity = parse_level(env);
    } catch (const Error&) {
      unknown_verbosity = env;
    }
  }
};

State& state() {
  static State* s = [] {
    auto* created = new State;  // never destroyed: threads may log while static objects are torn down
    if (!created->unknown_verbosity.empty()) {
      created->handler(Level::warning, "Unknown option TRANSFORMERS_VERBOSITY=" + created->unknown_verbosity +
                                           ", has to be one of: " + std::string(kLevelNames));
    }
    return created;
  }();
  return *s;
}

}  // namespace

std::string_view level_name(Level level) {
  switch (level) {
    case Level::debug:
      return "debug";
    case Level::info:
      return "info";
    case Level::warning:
      return "warning";
    case Level::error:
      return "error";
    case Level::critical:
      return "critical";
  }
  return "unknown";
}

Level parse_level(std::string_view name) {
  if (name == "detail") return Level::debug;
  for (Level l : kLevels) {
    if (level_name(l) == name) return l;
  }
  throw_error("unknown log level '", name, "' (levels: ", kLevelNames, ")");
}

Level verbosity() {
  return state().verbosity.load();
}

void set_verbosity(Level level) {
  state().verbosity = level;
}

bool enabled(Level level) {
  return level >= verbosity();
}

Handler set_handler(Handler handler) {
  State& s = state();
  const std::lock_guard lock(s.mutex);
  std::swap(s.handler, handler);
  return handler;
}

void log(Level level, const std::string& message) {
  if (!enabled(level)) return;
  State& s = state();
  const std::lock_guard lock(s.mutex);
  s.handler(level, message);
}

void log_once(Level level, const std::string& message) {
  if (!enabled(level)) return;
  State& s = state();
  const std::lock_guard lock(s.mutex);
  if (s.logged_once.insert(message).second) s.handler(level, message);
}

}  // namespace tfm::logging

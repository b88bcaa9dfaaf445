// tfm's log, as Transformers' (transformers.utils.logging): warnings and information lines at levels, and one
// verbosity that decides which print. The verbosity starts from TRANSFORMERS_VERBOSITY (debug, info, warning,
// error, critical; warning when unset) and set_verbosity overrides it. A message that passes goes to the
// handler: by default a line "<level>: <message>" on stderr.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace tfm::logging {

enum class Level { debug = 10, info = 20, warning = 30, error = 40, critical = 50 };

std::string_view level_name(Level level);
// A TRANSFORMERS_VERBOSITY value ("detail" is debug); anything else is a tfm::Error listing them.
Level parse_level(std::string_view name);

Level verbosity();
void set_verbosity(Level level);
// Whether a message at `level` passes the verbosity.
bool enabled(Level level);

// Where passing messages go; returns the handler it replaces (to put back: tests, programs embedding tfm).
using Handler = std::function<void(Level, const std::string& message)>;
Handler set_handler(Handler handler);

void log(Level level, const std::string& message);
// Transformers' warning_once / info_once: a message already logged once in this process is not repeated.
void log_once(Level level, const std::string& message);

}  // namespace tfm::logging

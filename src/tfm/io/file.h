// Whole-file reads and writes.
#pragma once

#include <string>
#include <string_view>

namespace tfm::io {

// The bytes of a file; throws tfm::Error "cannot read PATH" when it cannot be opened or read.
std::string read_file(const std::string& path);

// Writes `bytes` to a temporary file beside `path` and renames it over `path`, so a reader (or a run resumed
// after a crash) sees the old file or the new one, never half of one. Errors name the path.
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace tfm::io

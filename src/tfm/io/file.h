// Whole-file reads.
#pragma once

#include <string>

namespace tfm::io {

// The bytes of a file; throws tfm::Error "cannot read PATH" when it cannot be opened or read.
std::string read_file(const std::string& path);

}  // namespace tfm::io

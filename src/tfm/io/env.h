// Environment variables as huggingface_hub reads them.
#pragma once

namespace tfm::io {

// huggingface_hub's _is_true: 1, ON, YES, TRUE in any case.
bool env_is_true(const char* name);

}  // namespace tfm::io

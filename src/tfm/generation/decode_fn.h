// How generate/ turns token ids into text without knowing the tokenizer class: the caller passes a function
// that decodes a list of ids (as tokenizer.decode with the caller's options; bytes that do not form a whole
// UTF-8 character come back as U+FFFD, as the Rust tokenizers library returns them).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tfm {

using DecodeFn = std::function<std::string(const std::vector<int64_t>&)>;

}  // namespace tfm

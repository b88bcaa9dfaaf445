// The modes a kernel serves, as the kernels library's Mode: inference (a model in eval()) and training
// (train()). A kernel registers for a set of them (bits of uint8_t).
#pragma once

#include <cstdint>
#include <string_view>

namespace tfm {

enum class KernelMode : uint8_t { inference = 1, training = 2 };
inline constexpr uint8_t kAllModes = 3;

inline std::string_view kernel_mode_name(KernelMode mode) {
  return mode == KernelMode::inference ? "inference" : "training";
}

}  // namespace tfm

#pragma once

#include "tfm/backend/backend.h"

namespace tfm {
Backend& cpu_backend();
OpKernels& cpu_op_kernels();
}  // namespace tfm

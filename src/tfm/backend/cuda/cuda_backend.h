#pragma once

#include "tfm/backend/backend.h"

namespace tfm {
Backend& cuda_backend();
OpKernels& cuda_op_kernels();
}  // namespace tfm

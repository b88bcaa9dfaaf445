// The xpu backend's op kernels: the OpenCL C programs of kernels/*.cl, built once per device through its
// ProgramCache and launched on its in-order queue. Launches do not wait; copies to the host (in order on the
// same queue) and synchronize() do.
#pragma once

#include <cstddef>
#include <memory>

#include "tfm/backend/op_kernels.h"

namespace tfm::xpu {

class XpuBackend;

// The eager attention keeps its scores in a scratch buffer of at most this many bytes (or one query row's),
// running as many rows at a time as fit.
inline constexpr size_t kDefaultScoresBytes = size_t{64} << 20;

// The kernels for the devices of `backend`, which must outlive them.
std::unique_ptr<OpKernels> make_xpu_op_kernels(XpuBackend& backend,
                                               size_t scores_bytes = kDefaultScoresBytes);

}  // namespace tfm::xpu

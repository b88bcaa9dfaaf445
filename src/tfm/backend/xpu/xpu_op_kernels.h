// The xpu backend's op kernels: the OpenCL C programs of kernels/*.cl, built once per device through its
// ProgramCache and launched on its in-order queue. Launches do not wait; copies to the host (in order on the
// same queue) and synchronize() do.
#pragma once

#include <memory>

#include "tfm/backend/op_kernels.h"

namespace tfm::xpu {

class XpuBackend;

// The kernels for the devices of `backend`, which must outlive them.
std::unique_ptr<OpKernels> make_xpu_op_kernels(XpuBackend& backend);

}  // namespace tfm::xpu

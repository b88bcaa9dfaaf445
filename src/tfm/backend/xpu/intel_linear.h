// The Intel-only kernels of op::Linear: the sub-group few-row matmul (kernels/intel_gemv.cl) on devices with
// cl_intel_subgroups, and the DPAS matmul (kernels/intel_dpas.cl) on devices with XMX. XpuKernels::run takes
// one of them when it applies (LinearVariant::automatic) or when the registry asks for it by name; elsewhere
// the portable kernels of linear.cl run.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <vector>

#include "tfm/backend/op_set.h"
#include "tfm/backend/xpu/device_capabilities.h"
#include "tfm/backend/xpu/programs.h"

namespace tfm::xpu {

enum class LinearVariant {
  automatic,       // DPAS, else the sub-group kernel, where they apply; else portable
  portable,        // linear.cl only
  intel_subgroup,  // linear_subgroup_rows
  dpas,            // linear_dpas
};

// A kernel of the Intel programs and its launch shape. Its arguments are linear.cl's: x, w, bias, y, M, K, N.
struct IntelLinearLaunch {
  const Program* program;  // kept for the process (programs.h)
  const char* kernel;
  std::array<size_t, 2> items;  // rounded up to whole work-groups by the launch
  std::array<size_t, 2> group;
};

// Whether block reads may read `t`'s rows of K elements: its offset and every row 16-byte aligned, the
// strictest reading of cl_intel_subgroups' alignment rule (DPAS operands read as pairs too), cheap for
// model-sized K.
bool rows_block_aligned(const Tensor& t, int64_t K);

// Whether the Intel kernel of `variant` (intel_subgroup or dpas) runs `a` on a device with `device`.
bool intel_linear_supports(LinearVariant variant, const op::Linear& a, const DeviceCapabilities& device);

// The Intel kernel that computes `a` under `variant`, or nullopt for the portable kernels. A named variant
// the device or the arguments do not support is a tfm::Error.
std::optional<IntelLinearLaunch> intel_linear_launch(LinearVariant variant, const op::Linear& a,
                                                     const DeviceCapabilities& device);

// The Intel programs `device` can build in dtype `d` (every_program lists them for the ocloc gate).
std::vector<Program> intel_linear_programs(DType d, const DeviceCapabilities& device);

}  // namespace tfm::xpu

#include "tfm/backend/xpu/intel_linear.h"

#include <algorithm>

#include "tfm/backend/xpu/kernel_sources.h"
#include "tfm/core/error.h"

namespace tfm::xpu {
namespace {

constexpr size_t kGemvSubGroup = 16;  // every Intel GPU with sub-groups offers 16
constexpr size_t kGemvColumns = 4;    // sub-groups (output columns) per work-group
constexpr size_t kDpasRows = 8;       // rows of a DPAS tile (M of matrix_mad_k16)
constexpr int64_t kDpasK = 16;        // K per matrix_mad_k16
constexpr size_t kDpasSubGroups = 4;  // tiles per work-group, along the rows

// DPAS multiplies bf16 and f16 here, at a sub-group size the device must accept as required.
bool runs_dpas(DType d, const DeviceCapabilities& device) {
  return device.dpas && (d == DType::bfloat16 || d == DType::float16) &&
         device.offers_sub_group(static_cast<size_t>(device.dpas_sub_group_size()));
}

const Program& gemv_program(DType d) {
  return interned(
      [&] {
        return Program{"intel_gemv", kernel_sources::intel_gemv,
                       dtype_option(d) + " -DSUB_GROUP=" + std::to_string(kGemvSubGroup) + " -DSG_COLUMNS=" +
                           std::to_string(kGemvColumns) + " -DROWS_MAX=" + std::to_string(kRowsMax)};
      },
      d);
}

const Program& dpas_program(DType d, int sub_group) {
  return interned(
      [&] {
        return Program{"intel_dpas", kernel_sources::intel_dpas,
                       dtype_option(d) + " -DDPAS -DSUB_GROUP=" + std::to_string(sub_group) +
                           " -DDPAS_SUB_GROUPS=" + std::to_string(kDpasSubGroups)};
      },
      d, sub_group);
}

size_t blocks(int64_t size, size_t block) {
  return (static_cast<size_t>(size) + block - 1) / block;
}

}  // namespace

bool rows_block_aligned(const Tensor& t, int64_t K) {
  const auto bytes = [&](int64_t elements) { return static_cast<size_t>(elements) * dtype_size(t.dtype()); };
  return bytes(t.offset()) % 16 == 0 && bytes(K) % 16 == 0;
}

bool intel_linear_supports(LinearVariant variant, const op::Linear& a, const DeviceCapabilities& device) {
  const int64_t M = a.x.size(0), K = a.x.size(1);
  switch (variant) {
    case LinearVariant::intel_subgroup:
      return device.runs_intel_subgroups(kGemvSubGroup) && M >= 1 && M <= kRowsMax &&
             rows_block_aligned(a.w, K);
    case LinearVariant::dpas:
      return runs_dpas(a.dtype(), device) && M >= 1 && K % kDpasK == 0 && rows_block_aligned(a.x, K) &&
             rows_block_aligned(a.w, K);
    case LinearVariant::automatic:
    case LinearVariant::portable:
      return true;
  }
  return false;
}

std::optional<IntelLinearLaunch> intel_linear_launch(LinearVariant variant, const op::Linear& a,
                                                     const DeviceCapabilities& device) {
  const int64_t M = a.x.size(0), N = a.w.size(0);
  if (variant == LinearVariant::portable) return std::nullopt;
  if (variant == LinearVariant::automatic) {
    // DPAS tiles hold 8 rows: a decode step of a few rows is the sub-group kernel's.
    if (M > kRowsMax && intel_linear_supports(LinearVariant::dpas, a, device)) {
      variant = LinearVariant::dpas;
    } else if (intel_linear_supports(LinearVariant::intel_subgroup, a, device)) {
      variant = LinearVariant::intel_subgroup;
    } else {
      return std::nullopt;
    }
  }
  check(intel_linear_supports(variant, a, device), "xpu linear: the ",
        variant == LinearVariant::dpas ? "dpas" : "intel_subgroup", " kernel cannot run ", M, "x",
        a.x.size(1), " by ", N, " in ", dtype_name(a.dtype()), " on this device");
  if (variant == LinearVariant::dpas) {
    const auto sub_group = static_cast<size_t>(device.dpas_sub_group_size());
    return IntelLinearLaunch{&dpas_program(a.dtype(), device.dpas_sub_group_size()),
                             "linear_dpas",
                             {blocks(N, sub_group) * sub_group, blocks(M, kDpasRows)},
                             {sub_group, kDpasSubGroups}};
  }
  return IntelLinearLaunch{&gemv_program(a.dtype()),
                           "linear_subgroup_rows",
                           {static_cast<size_t>(N) * kGemvSubGroup, 1},
                           {kGemvSubGroup * kGemvColumns, 1}};
}

std::vector<Program> intel_linear_programs(DType d, const DeviceCapabilities& device) {
  std::vector<Program> programs;
  if (device.runs_intel_subgroups(kGemvSubGroup)) programs.push_back(gemv_program(d));
  if (runs_dpas(d, device)) programs.push_back(dpas_program(d, device.dpas_sub_group_size()));
  return programs;
}

}  // namespace tfm::xpu

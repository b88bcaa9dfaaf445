#include "tfm/backend/kernel_registry.h"

#include <atomic>
#include <map>
#include <set>
#include <tuple>

#include "tfm/backend/backend.h"
#include "tfm/backend/cpu/cpu_backend.h"
#include "tfm/backend/op_set.h"
#include "tfm/core/floats.h"
#ifdef TFM_HAVE_CUDA
#include "tfm/backend/cuda/cuda_backend.h"
#endif
#ifdef TFM_HAVE_XPU
#include "tfm/backend/xpu/xpu_backend.h"
#endif

namespace tfm {

size_t detail::next_op_index() {
  static std::atomic<size_t> next{0};
  return next++;
}

KernelRegistry::KernelRegistry() = default;
KernelRegistry::~KernelRegistry() = default;

std::vector<KernelInfo> KernelRegistry::list() const {
  std::vector<KernelInfo> out;
  for (const auto& t : tables_)
    if (t) t->list(out);
  return out;
}

void KernelRegistry::check_complete() const {
  std::map<std::tuple<std::string_view, DeviceType, DType>, int> defaults;
  for (const KernelInfo& k : list()) defaults[{k.op, k.device, k.dtype}] += k.is_default ? 1 : 0;
  for (const auto& [key, count] : defaults) {
    const auto& [op, device, dtype] = key;
    check(count == 1, "kernel ", op, " on ", device_type_name(device), " in ", dtype_name(dtype), " has ", count,
          " default variants; it needs one");
  }
}

void KernelRegistry::no_kernel(std::string_view op, DeviceType device, DType dtype, bool refused) const {
  if (refused) {
    throw_error(op, ": the ", device_type_name(device), " kernel for ", dtype_name(dtype),
                " cannot run these arguments");
  }
  std::set<std::string_view> dtypes;
  for (const KernelInfo& k : list())
    if (k.op == op && k.device == device) dtypes.insert(dtype_name(k.dtype));
  std::string have;
  for (std::string_view d : dtypes) have += std::string(have.empty() ? "" : ", ") + std::string(d);
  throw_error(op, " has no ", device_type_name(device), " kernel for ", dtype_name(dtype),
              have.empty() ? std::string(" (none for that device)") : "; it has kernels for " + have);
}

namespace {

// AddRmsNorm's default on every device: the residual add and the norm as two kernels, as Transformers'
// decoder layer computes them.
void add_then_rms_norm(const op::AddRmsNorm& a) {
  const DeviceType device = a.residual.device().type;
  kernel_registry().run(op::Add{a.residual, a.x}, device);
  kernel_registry().run(op::RmsNorm{a.residual, a.weight, a.eps, a.out}, device);
}

void register_composite_kernels(KernelRegistry& r) {
  for (DeviceType device : {DeviceType::cpu, DeviceType::cuda, DeviceType::xpu}) {
    for (DType d : kComputeDTypes) {
      if (r.find<op::Add>(device, d) && r.find<op::RmsNorm>(device, d))
        r.add<op::AddRmsNorm>(device, d, "default", {.run = add_then_rms_norm, .is_default = true});
    }
  }
}

}  // namespace

const KernelRegistry& kernel_registry() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry;  // never destroyed: kernels may run from other statics' destructors
    cpu::register_pointwise_kernels(*r);
    cpu::register_linear_kernels(*r);
    cpu::register_training_kernels(*r);
    cpu::register_sampling_kernels(*r);
#ifdef TFM_HAVE_CUDA
    cuda::register_kernels(*r);
#endif
#ifdef TFM_HAVE_XPU
    xpu::register_kernels(*r);
#endif
    register_composite_kernels(*r);
    r->check_complete();
    return r;
  }();
  return *registry;
}

}  // namespace tfm

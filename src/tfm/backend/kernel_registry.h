// Kernels of the op set (op_set.h), registered under (op, device kind, dtype, variant). Each (op, device,
// dtype) that has kernels has exactly one default variant; others are alternatives a layer can be given
// (KernelConfig, use_kernels). A kernel may refuse arguments it cannot run (`supports`), which leaves them to
// the default, as Transformers' kernelize falls back to a layer's own forward.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/core/device.h"
#include "tfm/core/dtype.h"
#include "tfm/core/error.h"
#include "tfm/core/kernel_mode.h"

namespace tfm {

// One registered kernel, as `tfm kernels` lists it.
struct KernelInfo {
  std::string_view op;
  std::string_view layer;  // empty for ops no layer owns
  DeviceType device;
  DType dtype;
  std::string variant;
  bool is_default;
  uint8_t modes;  // KernelMode bits
};

template <typename Op>
struct Kernel {
  void (*run)(const Op&);
  bool (*supports)(const Op&) = nullptr;  // null: any arguments ops/ accepts
  bool is_default = false;
  uint8_t modes = kAllModes;
};

namespace detail {
size_t next_op_index();
}
template <typename Op>
size_t op_index() {
  static const size_t index = detail::next_op_index();
  return index;
}

class KernelRegistry {
 public:
  KernelRegistry();
  ~KernelRegistry();
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  // Registers `kernel` for Op on `device` in `dtype` as `variant`; a second kernel under the same key, or a
  // second default, is an error.
  template <typename Op>
  void add(DeviceType device, DType dtype, std::string variant, Kernel<Op> kernel);

  // The kernel of `variant` (the default when empty), or nullptr when there is none.
  template <typename Op>
  const Kernel<Op>* find(DeviceType device, DType dtype, std::string_view variant = {}) const;

  // Whether a kernel of `variant` (or the default) is registered and accepts `args`.
  template <typename Op>
  bool supports(const Op& args, DeviceType device, std::string_view variant = {}) const;

  // The kernel for `args`: `variant`'s when it exists and accepts them, else the default when it accepts them;
  // nullptr when neither does. Each kernel's `supports` is asked once.
  template <typename Op>
  const Kernel<Op>* choose(const Op& args, DeviceType device, std::string_view variant = {}) const;
  // Runs `args` with the chosen kernel; an error naming op, device and dtype when there is none.
  template <typename Op>
  void run(const Op& args, DeviceType device, std::string_view variant = {}) const;

  // Every kernel, by op (in registration order), device, dtype and variant.
  std::vector<KernelInfo> list() const;
  // Checks that every (op, device, dtype) with kernels has one default.
  void check_complete() const;

 private:
  struct TableBase {
    virtual ~TableBase() = default;
    virtual void list(std::vector<KernelInfo>& out) const = 0;
  };
  template <typename Op>
  struct Entry {
    DeviceType device;
    DType dtype;
    std::string variant;
    Kernel<Op> kernel;
  };
  template <typename Op>
  struct Table final : TableBase {
    std::vector<Entry<Op>> entries;
    void list(std::vector<KernelInfo>& out) const override {
      for (const Entry<Op>& e : entries) {
        out.push_back({Op::name, Op::layer, e.device, e.dtype, e.variant, e.kernel.is_default, e.kernel.modes});
      }
    }
  };

  template <typename Op>
  const Table<Op>* table() const {
    const size_t i = op_index<Op>();
    return i < tables_.size() ? static_cast<const Table<Op>*>(tables_[i].get()) : nullptr;
  }
  [[noreturn]] void no_kernel(std::string_view op, DeviceType device, DType dtype, bool refused) const;

  std::vector<std::unique_ptr<TableBase>> tables_;  // by op_index; null for ops without kernels here
};

template <typename Op>
void KernelRegistry::add(DeviceType device, DType dtype, std::string variant, Kernel<Op> kernel) {
  const size_t i = op_index<Op>();
  if (tables_.size() <= i) tables_.resize(i + 1);
  if (!tables_[i]) tables_[i] = std::make_unique<Table<Op>>();
  auto& entries = static_cast<Table<Op>*>(tables_[i].get())->entries;
  for (const Entry<Op>& e : entries) {
    if (e.device != device || e.dtype != dtype) continue;
    check(e.variant != variant, "kernel ", Op::name, " on ", device_type_name(device), " in ", dtype_name(dtype),
          " registered twice as '", variant, "'");
    check(!(e.kernel.is_default && kernel.is_default), "kernel ", Op::name, " on ", device_type_name(device),
          " in ", dtype_name(dtype), " has two defaults: '", e.variant, "' and '", variant, "'");
  }
  entries.push_back({device, dtype, std::move(variant), kernel});
}

template <typename Op>
const Kernel<Op>* KernelRegistry::find(DeviceType device, DType dtype, std::string_view variant) const {
  const Table<Op>* t = table<Op>();
  if (!t) return nullptr;
  for (const Entry<Op>& e : t->entries) {
    if (e.device == device && e.dtype == dtype && (variant.empty() ? e.kernel.is_default : e.variant == variant))
      return &e.kernel;
  }
  return nullptr;
}

template <typename Op>
bool KernelRegistry::supports(const Op& args, DeviceType device, std::string_view variant) const {
  const Kernel<Op>* k = find<Op>(device, args.dtype(), variant);
  return k && (!k->supports || k->supports(args));
}

template <typename Op>
const Kernel<Op>* KernelRegistry::choose(const Op& args, DeviceType device, std::string_view variant) const {
  auto accepts = [&](const Kernel<Op>* k) { return k && (!k->supports || k->supports(args)); };
  const Kernel<Op>* asked = variant.empty() ? nullptr : find<Op>(device, args.dtype(), variant);
  if (accepts(asked)) return asked;
  const Kernel<Op>* fallback = find<Op>(device, args.dtype());
  return fallback != asked && accepts(fallback) ? fallback : nullptr;
}

template <typename Op>
void KernelRegistry::run(const Op& args, DeviceType device, std::string_view variant) const {
  const Kernel<Op>* k = choose(args, device, variant);
  if (!k) no_kernel(Op::name, device, args.dtype(), find<Op>(device, args.dtype()) != nullptr);
  k->run(args);
}

// The kernels of every device kind tfm was built with. Registering loads no device library.
const KernelRegistry& kernel_registry();

}  // namespace tfm

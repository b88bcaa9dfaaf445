// Which kernel variant each kind of layer runs: Transformers' use_kernels and KernelConfig, with tfm's kernel
// registry in place of the Hub. A mapping is JSON, keyed by layer kind (op_set.h's layer names: Attention,
// Embedding, Linear, RMSNorm, RotaryEmbedding, SiLUAndMul), each naming a variant for every device, or one per
// device key ("cpu", "cuda", "xpu"), or per device one per mode:
//   {"RMSNorm": "fused", "Linear": {"cpu": "reference"}, "Attention": {"cuda": {"inference": "eager"}}}
// `tfm kernels` lists the variants there are.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/core/device.h"
#include "tfm/core/dtype.h"
#include "tfm/core/kernel_mode.h"
#include "tfm/io/json.h"

namespace tfm {

class KernelRegistry;

class KernelConfig {
 public:
  KernelConfig() = default;
  // Every layer kind, device key and variant is checked against the registry; an unknown one is an error that
  // lists what exists. `registry` defaults to kernel_registry().
  static KernelConfig from_json(const json::Value& mapping);
  static KernelConfig from_json(const json::Value& mapping, const KernelRegistry& registry);
  // The command line's --kernels: JSON text, or the path of a file holding it.
  static KernelConfig parse(const std::string& json_or_path);

  // The variant mapped for `layer` on `device` in `mode`, if any.
  std::optional<std::string> variant(std::string_view layer, DeviceType device, KernelMode mode) const;
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    std::string layer;
    std::optional<DeviceType> device;  // none: every device
    std::optional<KernelMode> mode;    // none: both
    std::string variant;
  };
  std::vector<Entry> entries_;
};

// The variant each layer kind of a model runs on one device, in one dtype and mode; a kind not listed runs
// each op's default.
struct LayerKernels {
  std::map<std::string, std::string, std::less<>> variants;
  std::string_view of(std::string_view layer) const;
};

// Per layer kind: the KernelConfig's variant, else with use_kernels the built-in mapping's (as Transformers'
// use_kernels=True applies its default Hub mapping), else the default. A variant named for the device that
// has no kernel in `dtype` is an error; one that does not serve `mode` leaves the layer at its default, as
// kernelize falls back to a layer's own forward.
LayerKernels resolve_layer_kernels(const KernelConfig& config, bool use_kernels, DeviceType device, DType dtype,
                                   KernelMode mode);
LayerKernels resolve_layer_kernels(const KernelConfig& config, bool use_kernels, DeviceType device, DType dtype,
                                   KernelMode mode, const KernelRegistry& registry);

// The built-in mapping use_kernels applies: layer kind -> variant, where the device has it.
const std::map<std::string, std::string, std::less<>>& builtin_kernel_mapping();

}  // namespace tfm

#include "tfm/ops/kernel_config.h"

#include <set>

#include "tfm/backend/kernel_registry.h"
#include "tfm/core/error.h"
#include "tfm/io/file.h"

namespace tfm {
namespace {

std::string joined(const std::set<std::string, std::less<>>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::set<std::string, std::less<>> layer_kinds(const KernelRegistry& registry) {
  std::set<std::string, std::less<>> kinds;
  for (const KernelInfo& k : registry.list())
    if (!k.layer.empty()) kinds.emplace(k.layer);
  return kinds;
}

// The variants of the ops of `layer` on `device`, in `dtype` when given.
std::set<std::string, std::less<>> variants_of(const KernelRegistry& registry, std::string_view layer,
                                               DeviceType device, std::optional<DType> dtype = std::nullopt) {
  std::set<std::string, std::less<>> variants;
  for (const KernelInfo& k : registry.list()) {
    if (k.layer == layer && k.device == device && (!dtype || k.dtype == *dtype)) variants.insert(k.variant);
  }
  return variants;
}

// Whether some kernel of `layer`'s ops named `variant` on `device` in `dtype` serves `mode`.
bool serves(const KernelRegistry& registry, std::string_view layer, std::string_view variant, DeviceType device,
            DType dtype, KernelMode mode) {
  for (const KernelInfo& k : registry.list()) {
    if (k.layer == layer && k.variant == variant && k.device == device && k.dtype == dtype &&
        (k.modes & static_cast<uint8_t>(mode)))
      return true;
  }
  return false;
}

constexpr DeviceType kDevices[] = {DeviceType::cpu, DeviceType::cuda, DeviceType::xpu};

DeviceType parse_device_key(const std::string& key, const std::string& layer) {
  for (DeviceType d : kDevices)
    if (device_type_name(d) == key) return d;
  throw_error("KernelConfig: device '", key, "' (for ", layer, ") is not one tfm runs on: cpu, cuda, xpu");
}

KernelMode parse_mode_key(const std::string& key, const std::string& layer) {
  if (key == "inference") return KernelMode::inference;
  if (key == "training") return KernelMode::training;
  throw_error("KernelConfig: mode '", key, "' (for ", layer, ") is neither 'inference' nor 'training'");
}

}  // namespace

KernelConfig KernelConfig::from_json(const json::Value& mapping, const KernelRegistry& registry) {
  check(mapping.is_object(), "KernelConfig: the mapping must be a JSON object of layer kinds, got ",
        json::Value::type_name(mapping.type()));
  const auto kinds = layer_kinds(registry);
  KernelConfig config;
  auto add = [&](const std::string& layer, std::optional<DeviceType> device, std::optional<KernelMode> mode,
                 const json::Value& value) {
    check(value.is_string(), "KernelConfig: the variant for ", layer, " must be a string, got ",
          json::Value::type_name(value.type()));
    const std::string& variant = value.as_string();
    std::set<std::string, std::less<>> known;
    for (DeviceType d : kDevices) {
      if (!device || d == *device) known.merge(variants_of(registry, layer, d));
    }
    check(known.count(variant), "KernelConfig: ", layer, " has no variant '", variant, "' on ",
          device ? device_type_name(*device) : "any device",
          known.empty() ? std::string("; it has no kernels there") : "; variants: " + joined(known));
    config.entries_.push_back({layer, device, mode, variant});
  };
  for (const auto& [layer, value] : mapping.as_object()) {
    check(kinds.count(layer), "KernelConfig: '", layer, "' is not a layer kind tfm has kernels for; layer kinds: ",
          joined(kinds));
    if (value.is_string()) {
      add(layer, std::nullopt, std::nullopt, value);
      continue;
    }
    check(value.is_object(), "KernelConfig: ", layer,
          " must map to a variant or to an object keyed by device, got ", json::Value::type_name(value.type()));
    for (const auto& [device_key, per_device] : value.as_object()) {
      const DeviceType device = parse_device_key(device_key, layer);
      if (!per_device.is_object()) {
        add(layer, device, std::nullopt, per_device);
        continue;
      }
      for (const auto& [mode_key, variant] : per_device.as_object())
        add(layer, device, parse_mode_key(mode_key, layer), variant);
    }
  }
  return config;
}

KernelConfig KernelConfig::from_json(const json::Value& mapping) {
  return from_json(mapping, kernel_registry());
}

KernelConfig KernelConfig::parse(const std::string& json_or_path) {
  const size_t first = json_or_path.find_first_not_of(" \t\r\n");
  const bool inline_json = first != std::string::npos && json_or_path[first] == '{';
  const json::Value mapping =
      inline_json ? json::parse(json_or_path) : json::parse(io::read_file(json_or_path));
  return from_json(mapping);
}

std::optional<std::string> KernelConfig::variant(std::string_view layer, DeviceType device,
                                                 KernelMode mode) const {
  // The most specific entry wins: device and mode, then device, then every device.
  const Entry* best = nullptr;
  int best_rank = -1;
  for (const Entry& e : entries_) {
    if (e.layer != layer || (e.device && *e.device != device) || (e.mode && *e.mode != mode)) continue;
    const int rank = (e.device ? 2 : 0) + (e.mode ? 1 : 0);
    if (rank > best_rank) best = &e, best_rank = rank;
  }
  return best ? std::optional(best->variant) : std::nullopt;
}

std::string_view LayerKernels::of(std::string_view layer) const {
  const auto it = variants.find(layer);
  return it == variants.end() ? std::string_view() : std::string_view(it->second);
}

const std::map<std::string, std::string, std::less<>>& builtin_kernel_mapping() {
  // The residual add folded into the RMSNorm after it: one pass over the hidden states instead of two.
  static const std::map<std::string, std::string, std::less<>> mapping{{"RMSNorm", "fused"}};
  return mapping;
}

LayerKernels resolve_layer_kernels(const KernelConfig& config, bool use_kernels, DeviceType device, DType dtype,
                                   KernelMode mode) {
  return resolve_layer_kernels(config, use_kernels, device, dtype, mode, kernel_registry());
}

LayerKernels resolve_layer_kernels(const KernelConfig& config, bool use_kernels, DeviceType device, DType dtype,
                                   KernelMode mode, const KernelRegistry& registry) {
  LayerKernels out;
  for (const std::string& layer : layer_kinds(registry)) {
    std::optional<std::string> variant = config.variant(layer, device, mode);
    const bool configured = variant.has_value();
    if (!variant && use_kernels) {
      const auto it = builtin_kernel_mapping().find(layer);
      if (it != builtin_kernel_mapping().end() && variants_of(registry, layer, device, dtype).count(it->second))
        variant = it->second;
    }
    if (!variant) continue;
    if (configured && !variants_of(registry, layer, device, dtype).count(*variant)) {
      const auto known = variants_of(registry, layer, device);
      if (!known.count(*variant)) {
        throw_error("KernelConfig: ", layer, " has no variant '", *variant, "' on ", device_type_name(device),
                    known.empty() ? std::string("; it has no kernels there") : "; variants: " + joined(known));
      }
      throw_error("KernelConfig: ", layer, "'s variant '", *variant, "' has no ", device_type_name(device),
                  " kernel for ", dtype_name(dtype));
    }
    if (serves(registry, layer, *variant, device, dtype, mode)) out.variants.emplace(layer, *variant);
  }
  return out;
}

}  // namespace tfm

#include <iostream>

#include "commands.h"
#include "tfm/backend/kernel_registry.h"
#include "tfm/core/error.h"
#include "tfm/io/json.h"
#include "tfm/ops/kernel_config.h"

namespace tfm::cli {
namespace {

std::string modes_text(uint8_t modes) {
  std::string out;
  for (KernelMode m : {KernelMode::inference, KernelMode::training}) {
    if (modes & static_cast<uint8_t>(m)) out += std::string(out.empty() ? "" : ",") + std::string(kernel_mode_name(m));
  }
  return out;
}

int run(Args& args) {
  const auto device = args.get("device");
  const bool as_json = args.flag("json");
  args.finish();
  // A device names its kind here ("cuda:1" lists the cuda kernels): the registry holds what tfm was built
  // with, whether or not such a device is present.
  const std::optional<DeviceType> kind = device ? std::optional(Device::parse(*device).type) : std::nullopt;
  json::Array list;
  for (const KernelInfo& k : kernel_registry().list()) {
    if (kind && k.device != *kind) continue;
    const auto mapped = builtin_kernel_mapping().find(k.layer);
    json::Value v;
    v.set("op", std::string(k.op));
    v.set("layer", std::string(k.layer));
    v.set("device", std::string(device_type_name(k.device)));
    v.set("dtype", std::string(dtype_name(k.dtype)));
    v.set("variant", k.variant);
    v.set("default", k.is_default);
    v.set("use_kernels", mapped != builtin_kernel_mapping().end() && mapped->second == k.variant);
    v.set("modes", modes_text(k.modes));
    list.push_back(std::move(v));
  }
  if (as_json) {
    std::cout << json::dump(json::Value(std::move(list))) << "\n";
    return 0;
  }
  std::cout << "op\tlayer\tdevice\tdtype\tvariant\tdefault\tuse_kernels\tmodes\n";
  for (const json::Value& v : list) {
    std::cout << v.at("op").as_string() << "\t" << v.at("layer").as_string() << "\t" << v.at("device").as_string()
              << "\t" << v.at("dtype").as_string() << "\t" << v.at("variant").as_string() << "\t"
              << (v.at("default").as_bool() ? "yes" : "") << "\t" << (v.at("use_kernels").as_bool() ? "yes" : "")
              << "\t" << v.at("modes").as_string() << "\n";
  }
  return 0;
}

}  // namespace

const Command kKernelsCommand{
    "kernels", "list the kernels tfm was built with",
    "usage: tfm kernels [--device D] [--json]\n\n"
    "Lists every registered kernel: its op, the layer kind it serves (KernelConfig's key), device kind, dtype and\n"
    "variant, whether it is the default (what layers run without use_kernels), whether use_kernels picks it, and\n"
    "the modes (inference, training) it serves. --device cpu|cuda|xpu (or cuda:N, xpu:N) lists one kind's.\n"
    "--json prints a list of objects with those fields: op, layer, device, dtype, variant, default, use_kernels,\n"
    "modes.\n",
    run};

}  // namespace tfm::cli

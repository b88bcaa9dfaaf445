#include <iostream>
#include <string>

#include "commands.h"
#include "tfm/backend/backend.h"
#include "tfm/io/json.h"

namespace tfm::cli {
namespace {

void add_capabilities(json::Value& v, const xpu::DeviceCapabilities& c) {
  json::Array sizes;
  for (size_t size : c.sub_group_sizes) sizes.push_back(static_cast<int64_t>(size));
  v.set("eu_count", c.eu_count);
  v.set("sub_group_sizes", std::move(sizes));
  v.set("fp16", c.fp16);
  v.set("bf16", c.bf16);
  v.set("bf16_conversions", c.bf16_conversions);
  v.set("dpas", c.dpas);
  v.set("intel_subgroups", c.intel_subgroups);
  v.set("max_work_group_size", static_cast<int64_t>(c.max_work_group_size));
  v.set("unified_memory", c.unified_memory);
}

// "24 EUs, sub-groups 8/16/32, fp16, dpas": what decides the kernels, for the text form.
std::string summary(const xpu::DeviceCapabilities& c) {
  std::string s = std::to_string(c.eu_count) + " EUs";
  for (size_t i = 0; i < c.sub_group_sizes.size(); ++i)
    s += (i == 0 ? ", sub-groups " : "/") + std::to_string(c.sub_group_sizes[i]);
  if (c.fp16) s += ", fp16";
  if (c.dpas) s += ", dpas";
  return s;
}

int run(Args& args) {
  const bool as_json = args.flag("json");
  args.finish();
  const auto devices = list_devices();
  if (as_json) {
    json::Array list;
    for (const DeviceInfo& d : devices) {
      json::Value v;
      v.set("device", d.device.str());
      v.set("name", d.name);
      v.set("total_memory", static_cast<int64_t>(d.total_memory));
      v.set("free_memory", static_cast<int64_t>(d.free_memory));
      v.set("driver_version", d.driver_version);
      if (d.xpu_capabilities) add_capabilities(v, *d.xpu_capabilities);
      list.push_back(std::move(v));
    }
    std::cout << json::dump(json::Value(std::move(list))) << "\n";
    return 0;
  }
  for (const DeviceInfo& d : devices) {
    std::cout << d.device.str() << "\t" << d.name << "\t" << (d.total_memory >> 20) << " MiB";
    if (!d.driver_version.empty()) std::cout << "\t" << d.driver_version;
    if (d.xpu_capabilities) std::cout << "\t" << summary(*d.xpu_capabilities);
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

const Command kDevicesCommand{"devices", "list the devices tfm can use",
                              "usage: tfm devices [--json]\n\n"
                              "Lists cpu, cuda:N and xpu:N devices with name, memory and driver version; for\n"
                              "xpu devices also what the kernels use (EUs, sub-group sizes, fp16, bf16, DPAS,\n"
                              "work-group size, unified memory).\n",
                              run};

}  // namespace tfm::cli

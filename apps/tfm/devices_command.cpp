#include <iostream>

#include "commands.h"
#include "tfm/backend/backend.h"
#include "tfm/io/json.h"

namespace tfm::cli {
namespace {

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
      list.push_back(std::move(v));
    }
    std::cout << json::dump(json::Value(std::move(list))) << "\n";
    return 0;
  }
  for (const DeviceInfo& d : devices) {
    std::cout << d.device.str() << "\t" << d.name << "\t" << (d.total_memory >> 20) << " MiB";
    if (!d.driver_version.empty()) std::cout << "\t" << d.driver_version;
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

const Command kDevicesCommand{"devices", "list the devices tfm can use",
                              "usage: tfm devices [--json]\n\n"
                              "Lists cpu, cuda:N and xpu:N devices with name, memory and driver version.\n",
                              run};

}  // namespace tfm::cli

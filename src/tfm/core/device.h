// A device as torch names it: "cpu", "cuda", "cuda:1", "xpu:0". Which devices exist is the backends'
// business.
#pragma once

#include <string>
#include <string_view>

namespace tfm {

enum class DeviceType { cpu, cuda, xpu };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = -1;  // -1: no index given ("cuda"), meaning the current device of that kind

  // "cpu", "cuda", "cuda:1", "xpu:0"; throws tfm::Error naming the string when it is not a device.
  static Device parse(std::string_view text);
  std::string str() const;  // as torch prints it
  int index_or_zero() const { return index < 0 ? 0 : index; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
};

std::string_view device_type_name(DeviceType t);

}  // namespace tfm

#include "tfm/core/device.h"

#include <charconv>

#include "tfm/core/error.h"

namespace tfm {

std::string_view device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::cpu:
      return "cpu";
    case DeviceType::cuda:
      return "cuda";
    case DeviceType::xpu:
      return "xpu";
  }
  return "?";
}

Device Device::parse(std::string_view text) {
  const auto colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  Device d;
  if (kind == "cpu") {
    d.type = DeviceType::cpu;
  } else if (kind == "cuda") {
    d.type = DeviceType::cuda;
  } else if (kind == "xpu") {
    d.type = DeviceType::xpu;
  } else {
    throw_error("Expected one of cpu, cuda, xpu device type at start of device string: ", text);
  }
  if (colon != std::string_view::npos) {
    const std::string_view digits = text.substr(colon + 1);
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    check(!digits.empty() && ec == std::errc() && end == digits.data() + digits.size() && index >= 0,
          "Invalid device string: '", text, "'");
    d.index = index;
  }
  return d;
}

std::string Device::str() const {
  std::string s(device_type_name(type));
  if (index >= 0) s += ":" + std::to_string(index);
  return s;
}

}  // namespace tfm

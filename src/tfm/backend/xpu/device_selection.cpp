#include "tfm/backend/xpu/device_selection.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <tuple>

#include "tfm/core/error.h"

namespace tfm::xpu {
namespace {

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);
  if (!value) return std::nullopt;
  return std::string(value);
}

[[noreturn]] void bad_mask(std::string_view mask, std::string_view entry, std::string_view why) {
  throw_error("invalid ZE_AFFINITY_MASK '", mask, "': entry '", entry, "' ", why,
              "; expected comma-separated device indices N or N.M, e.g. \"0,1\" or \"0.1\"");
}

// One number of a mask entry: decimal digits only, no sign, no leading zero (the driver would read octal).
size_t parse_index(std::string_view mask, std::string_view entry, std::string_view digits) {
  if (digits.empty()) bad_mask(mask, entry, "has an empty number");
  if (digits.find_first_not_of("0123456789") != std::string_view::npos)
    bad_mask(mask, entry, "is not a number");
  if (digits.size() > 1 && digits[0] == '0') {
    bad_mask(mask, entry, "has a leading 0, which Intel's driver reads as octal");
  }
  size_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) bad_mask(mask, entry, "is out of range");
  return value;
}

}  // namespace

SelectionEnv SelectionEnv::from_environment() {
  return SelectionEnv{variable("TFM_XPU_PLATFORM"), variable("ZE_ENABLE_PCI_ID_DEVICE_ORDER"),
                      variable("ZE_AFFINITY_MASK")};
}

std::optional<std::set<size_t>> parse_affinity_mask(std::string_view mask) {
  if (mask.empty() || mask == "default") return std::nullopt;
  std::set<size_t> devices;
  size_t start = 0;
  while (true) {
    const size_t comma = mask.find(',', start);
    const std::string_view entry =
        mask.substr(start, comma == std::string_view::npos ? comma : comma - start);
    if (entry.empty()) bad_mask(mask, entry, "is empty");
    // N.M names tile M of root device N; tfm uses root devices, so the entry selects device N.
    const size_t dot = entry.find('.');
    if (dot != std::string_view::npos) {
      const std::string_view tile = entry.substr(dot + 1);
      if (tile.find('.') != std::string_view::npos) bad_mask(mask, entry, "has more than one '.'");
      parse_index(mask, entry, tile);
    }
    devices.insert(parse_index(mask, entry, entry.substr(0, dot)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return devices;
}

SelectionSettings parse_selection_env(const SelectionEnv& env) {
  SelectionSettings s;
  s.platform = env.platform.value_or("");
  const std::string order = env.pci_order.value_or("");
  check(order.empty() || order == "0" || order == "1", "invalid ZE_ENABLE_PCI_ID_DEVICE_ORDER '", order,
        "': expected 0 or 1");
  s.pci_order = order == "1";
  s.mask = parse_affinity_mask(env.affinity_mask.value_or(""));
  return s;
}

bool platform_matches(const SelectionSettings& settings, std::string_view name, std::string_view vendor) {
  if (settings.platform.empty()) return vendor.find("Intel") != std::string_view::npos;
  return name.find(settings.platform) != std::string_view::npos;
}

std::vector<size_t> select_devices(const std::vector<DeviceCandidate>& candidates,
                                   const SelectionSettings& settings) {
  std::vector<size_t> ordered;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const DeviceCandidate& c = candidates[i];
    if (!platform_matches(settings, c.platform_name, c.platform_vendor)) continue;
    if (settings.platform.empty() && !c.gpu) continue;
    ordered.push_back(i);
  }

  const auto key = [&](size_t i) {
    const DeviceCandidate& c = candidates[i];
    const bool integrated_last = !settings.pci_order && c.integrated;
    return std::tuple(integrated_last, !c.pci.has_value(), c.pci.value_or(PciAddress{}));
  };
  std::stable_sort(ordered.begin(), ordered.end(), [&](size_t a, size_t b) { return key(a) < key(b); });

  std::vector<size_t> selected;
  for (size_t k = 0; k < ordered.size(); ++k) {
    if (!settings.mask || settings.mask->contains(k)) selected.push_back(ordered[k]);
  }

  const bool any_discrete =
      std::any_of(selected.begin(), selected.end(), [&](size_t i) { return !candidates[i].integrated; });
  if (any_discrete) {
    std::erase_if(selected, [&](size_t i) { return candidates[i].integrated; });
  }
  return selected;
}

}  // namespace tfm::xpu

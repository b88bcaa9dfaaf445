// Which OpenCL devices become xpu:0, xpu:1, ...: the filtering and ordering rules of Intel's runtime (NEO)
// and PyTorch, written as pure functions over device descriptions so that tests cover them without hardware.
//
// The rules, in the order they apply:
//  1. Platforms: without TFM_XPU_PLATFORM, GPU devices of platforms whose vendor is Intel. With it, every
//     device (any type) of the platforms whose name contains its value: a testing aid that runs the portable
//     path on PoCL or on NVIDIA's OpenCL.
//  2. Order: ZE_ENABLE_PCI_ID_DEVICE_ORDER=1 sorts by PCI address (domain, bus, device, function); otherwise
//     discrete devices come before integrated ones, then PCI order. Devices the driver gives no PCI address
//     come after those it does; ties keep the order the driver reported.
//  3. ZE_AFFINITY_MASK: its indices refer to that ordered list; it selects and never reorders ("1,0" is
//     "0,1"); indices past the end select nothing; "N.M" selects root device N.
//  4. As PyTorch does, integrated GPUs are dropped when a discrete one remains.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::xpu {

struct PciAddress {
  uint32_t domain = 0;
  uint32_t bus = 0;
  uint32_t device = 0;
  uint32_t function = 0;
  auto operator<=>(const PciAddress&) const = default;
};

// One OpenCL device as the ICD loader and its driver report it.
struct DeviceCandidate {
  std::string platform_name;      // CL_PLATFORM_NAME
  std::string platform_vendor;    // CL_PLATFORM_VENDOR
  bool gpu = false;               // CL_DEVICE_TYPE_GPU
  bool integrated = false;        // shares memory with the host (CL_DEVICE_HOST_UNIFIED_MEMORY)
  std::optional<PciAddress> pci;  // from cl_khr_pci_bus_info, when the driver has it
};

// The raw values of the variables that choose devices; nullopt when unset.
struct SelectionEnv {
  std::optional<std::string> platform;       // TFM_XPU_PLATFORM
  std::optional<std::string> pci_order;      // ZE_ENABLE_PCI_ID_DEVICE_ORDER
  std::optional<std::string> affinity_mask;  // ZE_AFFINITY_MASK
  static SelectionEnv from_environment();
};

// The same variables, validated.
struct SelectionSettings {
  std::string platform;                  // "" = Intel GPUs only
  bool pci_order = false;                // pure PCI order instead of discrete first
  std::optional<std::set<size_t>> mask;  // indices into the ordered list; nullopt selects every device
};

// ZE_AFFINITY_MASK: "" and "default" select everything; otherwise comma-separated entries N or N.M of
// decimal numbers. Anything else (ranges "0-1", empty entries, hex, a leading 0 that the driver would read
// as octal) throws tfm::Error naming the mask, where Intel's driver would abort inside its initialisation.
std::optional<std::set<size_t>> parse_affinity_mask(std::string_view mask);

// Throws tfm::Error naming the variable and its value when one is invalid.
SelectionSettings parse_selection_env(const SelectionEnv& env);

// Whether devices of this platform can be selected at all (rule 1 before the device type is known); lets
// discovery skip querying the devices of platforms that cannot match.
bool platform_matches(const SelectionSettings& settings, std::string_view name, std::string_view vendor);

// The candidates that become xpu devices, as indices into `candidates`, in xpu order.
std::vector<size_t> select_devices(const std::vector<DeviceCandidate>& candidates,
                                   const SelectionSettings& settings);

}  // namespace tfm::xpu

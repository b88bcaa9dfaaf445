// The xpu device selection rules on synthetic device lists: no OpenCL involved.
#include "tfm/backend/xpu/device_selection.h"

#include <gtest/gtest.h>

#include "tfm/core/error.h"

namespace tfm::xpu {
namespace {

constexpr const char* kIntelPlatform = "Intel(R) OpenCL Graphics";
constexpr const char* kIntelVendor = "Intel(R) Corporation";

DeviceCandidate intel_gpu(bool integrated, std::optional<PciAddress> pci) {
  return DeviceCandidate{kIntelPlatform, kIntelVendor, true, integrated, pci};
}
DeviceCandidate discrete(uint32_t bus) {
  return intel_gpu(false, PciAddress{0, bus, 0, 0});
}
DeviceCandidate integrated(uint32_t bus) {
  return intel_gpu(true, PciAddress{0, bus, 2, 0});
}

SelectionSettings settings(const char* mask, const char* pci_order = nullptr,
                           const char* platform = nullptr) {
  SelectionEnv env;
  if (platform) env.platform = platform;
  if (pci_order) env.pci_order = pci_order;
  if (mask) env.affinity_mask = mask;
  return parse_selection_env(env);
}

using Indices = std::vector<size_t>;

TEST(AffinityMask, EmptyAndDefaultSelectEverything) {
  EXPECT_FALSE(parse_affinity_mask("").has_value());
  EXPECT_FALSE(parse_affinity_mask("default").has_value());
}

TEST(AffinityMask, ListsAndTilesNameRootDevices) {
  EXPECT_EQ(parse_affinity_mask("1"), std::set<size_t>({1}));
  EXPECT_EQ(parse_affinity_mask("0,1"), std::set<size_t>({0, 1}));
  EXPECT_EQ(parse_affinity_mask("1,0"), std::set<size_t>({0, 1}));
  EXPECT_EQ(parse_affinity_mask("0.0"), std::set<size_t>({0}));
  EXPECT_EQ(parse_affinity_mask("0.2,1.3,1.0,0.3"), std::set<size_t>({0, 1}));
  EXPECT_EQ(parse_affinity_mask("10,3,3"), std::set<size_t>({3, 10}));
}

TEST(AffinityMask, InvalidMasksAreErrorsNamingThem) {
  for (const char* bad :
       {"0-1",       "a",  "0,,1", ",0", "0,", ",",   "0.0.0", "0x1", " 0",
        "0 ",        "-1", "+1",   "1.", ".1", "010", "0.01",  "1;2", "99999999999999999999999999",
        "default,0", "all"}) {
    try {
      parse_affinity_mask(bad);
      ADD_FAILURE() << "accepted ZE_AFFINITY_MASK '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ZE_AFFINITY_MASK '" + std::string(bad) + "'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(AffinityMask, ErrorsSayWhatIsWrongWithTheEntry) {
  const auto message = [](const char* mask) {
    try {
      parse_affinity_mask(mask);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message("0-1").find("entry '0-1' is not a number"), std::string::npos) << message("0-1");
  EXPECT_NE(message("0,,1").find("entry '' is empty"), std::string::npos) << message("0,,1");
  EXPECT_NE(message("1,010").find("entry '010' has a leading 0"), std::string::npos) << message("1,010");
  EXPECT_NE(message("0.1.2").find("entry '0.1.2' has more than one '.'"), std::string::npos);
  EXPECT_NE(message("99999999999999999999999999").find("is out of range"), std::string::npos);
}

TEST(SelectionEnv, PciOrderIsZeroOrOne) {
  EXPECT_FALSE(settings(nullptr).pci_order);
  EXPECT_FALSE(settings(nullptr, "").pci_order);
  EXPECT_FALSE(settings(nullptr, "0").pci_order);
  EXPECT_TRUE(settings(nullptr, "1").pci_order);
  for (const char* bad : {"yes", "true", "2", " 1"}) {
    EXPECT_THROW(settings(nullptr, bad), Error) << bad;
  }
  try {
    settings(nullptr, "yes");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ZE_ENABLE_PCI_ID_DEVICE_ORDER 'yes'"), std::string::npos)
        << e.what();
  }
}

TEST(SelectDevices, TwoCardsFollowPciOrderWhateverTheDriverOrder) {
  const std::vector<DeviceCandidate> cards = {discrete(0x3a), discrete(0x18)};
  EXPECT_EQ(select_devices(cards, settings(nullptr)), Indices({1, 0}));
  EXPECT_EQ(select_devices(cards, settings(nullptr, "1")), Indices({1, 0}));
}

TEST(SelectDevices, MaskSelectsWithoutReordering) {
  // Driver order is B (bus 0x3a), A (bus 0x18); xpu order is A, B.
  const std::vector<DeviceCandidate> cards = {discrete(0x3a), discrete(0x18)};
  EXPECT_EQ(select_devices(cards, settings("1")), Indices({0}));
  EXPECT_EQ(select_devices(cards, settings("0")), Indices({1}));
  EXPECT_EQ(select_devices(cards, settings("0,1")), Indices({1, 0}));
  EXPECT_EQ(select_devices(cards, settings("1,0")), Indices({1, 0}));
  EXPECT_EQ(select_devices(cards, settings("0.0")), Indices({1}));
  EXPECT_EQ(select_devices(cards, settings("1.1")), Indices({0}));
  EXPECT_EQ(select_devices(cards, settings("5")), Indices({}));
  EXPECT_EQ(select_devices(cards, settings("1,5")), Indices({0}));
  EXPECT_EQ(select_devices(cards, settings("")), Indices({1, 0}));
  EXPECT_EQ(select_devices(cards, settings("default")), Indices({1, 0}));
}

TEST(SelectDevices, DiscreteBeforeIntegratedUnlessPciOrder) {
  // The integrated GPU sits at a lower PCI address than the discrete card, as on most desktops.
  const std::vector<DeviceCandidate> mixed = {integrated(0x00), discrete(0x03)};
  // Discrete first: index 0 is the card, index 1 the iGPU.
  EXPECT_EQ(select_devices(mixed, settings("0")), Indices({1}));
  EXPECT_EQ(select_devices(mixed, settings("1")), Indices({0}));
  // PCI order: index 0 is the iGPU.
  EXPECT_EQ(select_devices(mixed, settings("0", "1")), Indices({0}));
  EXPECT_EQ(select_devices(mixed, settings("1", "1")), Indices({1}));
  EXPECT_EQ(select_devices(mixed, settings("1", "0")), Indices({0}));
}

TEST(SelectDevices, IntegratedGpusAreDroppedWhileADiscreteOneRemains) {
  const std::vector<DeviceCandidate> mixed = {integrated(0x00), discrete(0x03), discrete(0x83)};
  EXPECT_EQ(select_devices(mixed, settings(nullptr)), Indices({1, 2}));
  EXPECT_EQ(select_devices(mixed, settings(nullptr, "1")), Indices({1, 2}));
  EXPECT_EQ(select_devices(mixed, settings("0,2")), Indices({1}));
  EXPECT_EQ(select_devices(mixed, settings("2")), Indices({0}));
  EXPECT_EQ(select_devices({integrated(0x00)}, settings(nullptr)), Indices({0}));
}

TEST(SelectDevices, PciOrderComparesDomainBusDeviceFunction) {
  const std::vector<DeviceCandidate> cards = {
      intel_gpu(false, PciAddress{1, 0x00, 0, 0}), intel_gpu(false, PciAddress{0, 0x80, 0, 1}),
      intel_gpu(false, PciAddress{0, 0x80, 0, 0}), intel_gpu(false, PciAddress{0, 0x4d, 1, 0}),
      intel_gpu(false, PciAddress{0, 0x4d, 0, 0})};
  EXPECT_EQ(select_devices(cards, settings(nullptr, "1")), Indices({4, 3, 2, 1, 0}));
  EXPECT_EQ(select_devices(cards, settings(nullptr, "0")), Indices({4, 3, 2, 1, 0}));
}

TEST(SelectDevices, DevicesWithoutPciAddressComeLastInDriverOrder) {
  const std::vector<DeviceCandidate> cards = {intel_gpu(false, std::nullopt), discrete(0x90),
                                              intel_gpu(false, std::nullopt), discrete(0x10)};
  EXPECT_EQ(select_devices(cards, settings(nullptr)), Indices({3, 1, 0, 2}));
  EXPECT_EQ(select_devices(cards, settings(nullptr, "1")), Indices({3, 1, 0, 2}));
}

TEST(SelectDevices, TilesOfOneCardKeepDriverOrder) {
  // A FLAT-hierarchy driver reports each tile as a device; tiles share their card's PCI address.
  const std::vector<DeviceCandidate> tiles = {discrete(0x9a), discrete(0x9a), discrete(0x29), discrete(0x29)};
  EXPECT_EQ(select_devices(tiles, settings(nullptr)), Indices({2, 3, 0, 1}));
  EXPECT_EQ(select_devices(tiles, settings("1,2")), Indices({3, 0}));
}

TEST(SelectDevices, OnlyIntelGpusWithoutThePlatformVariable) {
  const std::vector<DeviceCandidate> devices = {
      {"NVIDIA CUDA", "NVIDIA Corporation", true, false, PciAddress{0, 0x01, 0, 0}},
      {"Intel(R) OpenCL", kIntelVendor, false, true, std::nullopt},  // Intel's CPU runtime
      {"Portable Computing Language", "The pocl project", false, true, std::nullopt},
      discrete(0x05)};
  EXPECT_EQ(select_devices(devices, settings(nullptr)), Indices({3}));
  EXPECT_EQ(select_devices(devices, settings(nullptr, nullptr, "")), Indices({3}));
  EXPECT_TRUE(platform_matches(settings(nullptr), kIntelPlatform, kIntelVendor));
  EXPECT_FALSE(platform_matches(settings(nullptr), "NVIDIA CUDA", "NVIDIA Corporation"));
}

TEST(SelectDevices, PlatformVariableWidensToOnePlatformOfAnyDeviceType) {
  const std::vector<DeviceCandidate> devices = {
      {"NVIDIA CUDA", "NVIDIA Corporation", true, false, PciAddress{0, 0x21, 0, 0}},
      {"Portable Computing Language", "The pocl project", false, true, std::nullopt},
      {"NVIDIA CUDA", "NVIDIA Corporation", true, false, PciAddress{0, 0x01, 0, 0}},
      discrete(0x05)};
  EXPECT_EQ(select_devices(devices, settings(nullptr, nullptr, "Portable Computing Language")), Indices({1}));
  EXPECT_EQ(select_devices(devices, settings(nullptr, nullptr, "NVIDIA CUDA")), Indices({2, 0}));
  EXPECT_EQ(select_devices(devices, settings("1", nullptr, "NVIDIA")), Indices({0}));
  EXPECT_EQ(select_devices(devices, settings(nullptr, nullptr, "AMD")), Indices({}));
  EXPECT_FALSE(platform_matches(settings(nullptr, nullptr, "NVIDIA"), kIntelPlatform, kIntelVendor));
}

}  // namespace
}  // namespace tfm::xpu

#include "tfm/backend/cpu/cpu_backend.h"

#include <sys/sysinfo.h>

#include <cstring>
#include <fstream>

namespace tfm {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "cpu";
}

class CpuBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::cpu; }
  int device_count() override { return 1; }
  DeviceInfo info(int) override {
    struct sysinfo si {};
    sysinfo(&si);
    DeviceInfo d;
    d.device = Device{DeviceType::cpu, -1};
    d.name = cpu_model_name();
    d.total_memory = static_cast<size_t>(si.totalram) * si.mem_unit;
    d.free_memory =
        host_available_memory().value_or(static_cast<size_t>(si.freeram + si.bufferram) * si.mem_unit);
    return d;
  }
  void* allocate(int, size_t bytes) override { return host_allocate(bytes); }
  void deallocate(int, void* p) override { host_free(p); }
  void copy_from_host(int, DeviceSpan dst, const void* src, size_t bytes) override {
    std::memcpy(address(dst), src, bytes);
  }
  void copy_to_host(int, void* dst, DeviceSpan src, size_t bytes) override {
    std::memcpy(dst, address(src), bytes);
  }
  void copy_on_device(int, DeviceSpan dst, DeviceSpan src, size_t bytes) override {
    std::memcpy(address(dst), address(src), bytes);
  }
  void synchronize(int) override {}
  size_t memory_allocated(int) override { return host_tensor_bytes(); }
  bool supports_dtype(int, DType dtype) override {
    return dtype == DType::float32 || dtype == DType::bfloat16 || dtype == DType::float16;
  }

 private:
  static char* address(DeviceSpan s) { return static_cast<char*>(s.base) + s.offset; }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace tfm

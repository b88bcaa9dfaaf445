#include "tfm/backend/backend.h"

#include <cstring>
#include <vector>

#include "tfm/backend/cpu/cpu_backend.h"
#include "tfm/core/error.h"
#include "tfm/core/parallel.h"
#ifdef TFM_HAVE_CUDA
#include "tfm/backend/cuda/cuda_backend.h"
#endif
#ifdef TFM_HAVE_XPU
#include "tfm/backend/xpu/xpu_backend.h"
#endif

namespace tfm {

void read_in_parallel(const HostReader& read, void* dst, size_t offset, size_t bytes) {
  constexpr int64_t kPiece = int64_t{512} << 10;
  const auto n = static_cast<int64_t>(bytes);
  parallel_for(n, {.enabled = n > kPiece, .chunk = kPiece}, [&](int64_t begin, int64_t end) {
    read(static_cast<char*>(dst) + begin, offset + static_cast<size_t>(begin),
         static_cast<size_t>(end - begin));
  });
}

void Backend::copy_from_reader(int index, DeviceSpan dst, size_t bytes, const HostReader& read) {
  constexpr size_t kBuffer = size_t{16} << 20;
  std::vector<char> buffer(std::min(bytes, kBuffer));
  for (size_t begin = 0; begin < bytes; begin += kBuffer) {
    const size_t n = std::min(kBuffer, bytes - begin);
    read_in_parallel(read, buffer.data(), begin, n);
    copy_from_host(index, DeviceSpan(dst.base, dst.offset + begin), buffer.data(), n);
  }
}

void Backend::fill_zero(int index, DeviceSpan dst, size_t bytes) {
  constexpr size_t kBuffer = size_t{16} << 20;
  const std::vector<char> zeros(std::min(bytes, kBuffer), 0);
  for (size_t begin = 0; begin < bytes; begin += kBuffer)
    copy_from_host(index, DeviceSpan(dst.base, dst.offset + begin), zeros.data(), std::min(kBuffer, bytes - begin));
}

namespace {

class CopiedAlready final : public PendingCopy {
 public:
  void wait() override {}
};

}  // namespace

std::unique_ptr<PendingCopy> Backend::copy_to_host_queued(int index, void* dst, DeviceSpan src, size_t bytes) {
  copy_to_host(index, dst, src, bytes);
  return std::make_unique<CopiedAlready>();
}

std::unique_ptr<DeviceGraph> Backend::capture(int, const std::function<void()>&) {
  return nullptr;
}

std::string Backend::why_no_devices() {
  return "";
}

std::string Backend::attention_unavailable(int, std::string_view name) {
  if (name != "flash_attention_3") return "";
  return "Flash Attention 3 is not available on CPU. Please make sure torch can access a CUDA device.";
}

Backend* find_backend(DeviceType type) {
  switch (type) {
    case DeviceType::cpu:
      return &cpu_backend();
    case DeviceType::cuda:
#ifdef TFM_HAVE_CUDA
      return &cuda_backend();
#else
      return nullptr;
#endif
    case DeviceType::xpu:
#ifdef TFM_HAVE_XPU
      return &xpu::xpu_backend();
#else
      return nullptr;
#endif
  }
  return nullptr;
}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> out;
  for (DeviceType t : {DeviceType::cpu, DeviceType::cuda, DeviceType::xpu}) {
    Backend* b = find_backend(t);
    if (!b) continue;
    for (int i = 0, n = b->device_count(); i < n; ++i) out.push_back(b->info(i));
  }
  return out;
}

namespace {
int count_of(DeviceType t) {
  Backend* b = find_backend(t);
  return b ? b->device_count() : 0;
}

Backend& compiled_backend(DeviceType t) {
  Backend* b = find_backend(t);
  if (!b) throw_error("tfm was built without the ", device_type_name(t), " backend");
  return *b;
}

[[noreturn]] void absent(std::string_view spec, DeviceType type) {
  std::string present;
  for (const DeviceInfo& d : list_devices()) present += (present.empty() ? "" : ", ") + d.device.str();
  Backend* b = find_backend(type);
  const std::string why =
      b ? b->why_no_devices() : "tfm was built without the " + std::string(device_type_name(type)) + " backend";
  throw_error("device '", spec, "' is not available", why.empty() ? "" : " (" + why + ")",
              "; available devices: ", present);
}
}  // namespace

Device resolve_device(std::string_view spec) {
  check(!spec.empty(), "Device string must not be empty");  // torch.device("")'s words
  if (spec == "auto") {
    for (DeviceType t : {DeviceType::cuda, DeviceType::xpu}) {
      if (count_of(t) > 0) return Device{t, 0};
    }
    return Device{DeviceType::cpu, -1};
  }
  Device d = Device::parse(spec);
  if (d.type == DeviceType::cpu) return Device{DeviceType::cpu, -1};
  if (d.index < 0) d.index = 0;
  if (d.index >= count_of(d.type)) absent(spec, d.type);
  return d;
}

bool is_bf16_supported(Device device) {
  Backend* b = find_backend(device.type);
  const int index = device.index_or_zero();
  return b && index < b->device_count() && b->supports_dtype(index, DType::bfloat16);
}

Tensor empty(const Shape& shape, DType dtype, Device device) {
  if (device.type == DeviceType::cpu) return Tensor::cpu(shape, dtype);
  Backend* b = &compiled_backend(device.type);
  const int index = device.index_or_zero();
  const size_t bytes = shape_bytes(shape, dtype);
  void* p = b->allocate(index, bytes);
  auto storage = std::make_shared<Storage>(p, bytes, Device{device.type, index},
                                           [b, index](void* q) { b->deallocate(index, q); });
  return Tensor(std::move(storage), shape, dtype);
}

namespace {
DeviceSpan span(const Tensor& t) {
  return {t.storage()->data(), t.byte_offset()};
}
}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  check(dst.is_contiguous() && src.is_contiguous() && dst.nbytes() == src.nbytes() &&
            dst.device() == src.device(),
        "copy needs contiguous tensors of one size on one device, got ", dst.str(), " and ", src.str());
  if (src.nbytes() == 0) return;
  if (src.device().type == DeviceType::cpu) {
    std::memcpy(dst.raw(), src.raw(), src.nbytes());
  } else {
    compiled_backend(src.device().type)
        .copy_on_device(src.device().index, span(dst), span(src), src.nbytes());
  }
}

Tensor clone(const Tensor& t) {
  Tensor out = empty(t.shape(), t.dtype(), t.device());
  copy(out, t);
  return out;
}

void copy_from_host(const Tensor& dst, const void* src) {
  check(dst.is_contiguous(), "copy_from_host needs a contiguous destination, got ", dst.str());
  if (dst.nbytes() == 0) return;
  if (dst.device().type == DeviceType::cpu) {
    std::memcpy(dst.raw(), src, dst.nbytes());
  } else {
    compiled_backend(dst.device().type).copy_from_host(dst.device().index, span(dst), src, dst.nbytes());
  }
}

std::unique_ptr<PendingCopy> copy_to_host_queued(const Tensor& src, void* dst) {
  check(src.is_contiguous(), "copy_to_host_queued needs a contiguous source, got ", src.str());
  if (src.nbytes() == 0) return std::make_unique<CopiedAlready>();
  if (src.device().type == DeviceType::cpu) {
    std::memcpy(dst, src.raw(), src.nbytes());
    return std::make_unique<CopiedAlready>();
  }
  return compiled_backend(src.device().type).copy_to_host_queued(src.device().index, dst, span(src), src.nbytes());
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  zero(t);
  return t;
}

std::vector<int64_t> arena_offsets(const std::vector<int64_t>& numels) {
  std::vector<int64_t> offsets{0};
  for (const int64_t numel : numels) offsets.push_back(offsets.back() + (numel + 3) / 4 * 4);
  return offsets;
}

void zero(const Tensor& t) {
  check(t.is_contiguous(), "zero needs a contiguous tensor, got ", t.str());
  if (t.nbytes() == 0) return;
  if (t.device().type == DeviceType::cpu) {
    std::memset(t.raw(), 0, t.nbytes());
  } else {
    compiled_backend(t.device().type).fill_zero(t.device().index, span(t), t.nbytes());
  }
}

void copy_from_reader(const Tensor& dst, const HostReader& read) {
  check(dst.is_contiguous(), "copy_from_reader needs a contiguous destination, got ", dst.str());
  if (dst.nbytes() == 0) return;
  if (dst.device().type == DeviceType::cpu) {
    read_in_parallel(read, dst.raw(), 0, dst.nbytes());
  } else {
    compiled_backend(dst.device().type).copy_from_reader(dst.device().index, span(dst), dst.nbytes(), read);
  }
}

Tensor to_device(const Tensor& t, Device device) {
  if (t.device().type == device.type &&
      (device.type == DeviceType::cpu || t.device().index == device.index_or_zero())) {
    return t;
  }
  check(t.is_contiguous(), "to_device needs a contiguous tensor, got ", t.str());
  Tensor out = empty(t.shape(), t.dtype(), device);
  const Device from = t.device();
  const size_t bytes = t.nbytes();
  if (bytes == 0) return out;
  if (from.type == DeviceType::cpu && device.type == DeviceType::cpu) {
    std::memcpy(out.raw(), t.raw(), bytes);
  } else if (from.type == DeviceType::cpu) {
    compiled_backend(device.type).copy_from_host(out.device().index, span(out), t.raw(), bytes);
  } else if (device.type == DeviceType::cpu) {
    compiled_backend(from.type).copy_to_host(from.index, out.raw(), span(t), bytes);
  } else if (from == out.device()) {
    compiled_backend(from.type).copy_on_device(from.index, span(out), span(t), bytes);
  } else {
    return to_device(to_device(t, Device{}), device);  // across devices, through the host
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> on_host(std::vector<std::pair<std::string, Tensor>> named) {
  for (auto& [name, t] : named) t = to_device(t, Device{});
  return named;
}

}  // namespace tfm

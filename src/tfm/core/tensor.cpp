#include "tfm/core/tensor.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>

#include "tfm/core/error.h"

namespace tfm {

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// These run for every tensor an op touches: their messages are built only when they fail.
int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw_error("shape ", shape_str(shape), " has a negative size");
    int64_t product = 0;
    if (__builtin_mul_overflow(n, d, &product))
      throw_error("the elements of shape ", shape_str(shape), " (", n, " * ", d, ") does not fit in 64 bits");
    n = product;
  }
  return n;
}

size_t shape_bytes(const Shape& shape, DType dtype) {
  const int64_t n = shape_numel(shape), size = static_cast<int64_t>(dtype_size(dtype));
  int64_t bytes = 0;
  if (__builtin_mul_overflow(n, size, &bytes))
    throw_error("the bytes of shape ", shape_str(shape), " (", n, " * ", size, ") does not fit in 64 bits");
  return static_cast<size_t>(bytes);
}

std::optional<size_t> host_available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

void* host_allocate(size_t bytes) {
  constexpr size_t kAlign = 64;
  // Reading /proc/meminfo costs a few microseconds: worth it only for blocks that could matter.
  constexpr size_t kLarge = size_t{256} << 20;
  if (bytes > std::numeric_limits<size_t>::max() - 2 * kAlign) throw std::bad_alloc();
  if (bytes >= kLarge && bytes > host_available_memory().value_or(bytes)) throw std::bad_alloc();
  void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign + kAlign);
  if (!p) throw std::bad_alloc();
  return p;
}

void host_free(void* p) {
  std::free(p);
}

Storage::Storage(void* data, size_t bytes, Device device, std::function<void(void*)> release)
    : data_(data), bytes_(bytes), device_(device), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) release_(data_);
}

namespace {
Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}
}  // namespace

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype, int64_t offset)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      strides_(contiguous_strides(shape_)),
      dtype_(dtype),
      offset_(offset) {}

namespace {
std::atomic<size_t> g_host_tensor_bytes{0};
}  // namespace

size_t host_tensor_bytes() {
  return g_host_tensor_bytes.load();
}

Tensor Tensor::cpu(const Shape& shape, DType dtype) {
  const size_t bytes = shape_bytes(shape, dtype);
  void* data = nullptr;
  try {
    data = host_allocate(bytes);
  } catch (const std::bad_alloc&) {
    throw_error("out of memory: a ", dtype_name(dtype), shape_str(shape), " tensor needs ", bytes,
                " bytes of host memory, and ", host_available_memory().value_or(0), " are available");
  }
  std::memset(data, 0, bytes);
  g_host_tensor_bytes += bytes;
  auto release = [bytes](void* p) {
    host_free(p);
    g_host_tensor_bytes -= bytes;
  };
  return Tensor(std::make_shared<Storage>(data, bytes, Device{}, release), shape, dtype);
}

bool Tensor::is_contiguous() const {
  return strides_ == contiguous_strides(shape_);
}

bool Tensor::lies_right_after(const Tensor& before) const {
  return defined() && storage_ == before.storage_ && dtype_ == before.dtype_ && is_contiguous() &&
         before.is_contiguous() && offset_ == before.offset_ + before.numel();
}

Tensor Tensor::reshape(const Shape& shape) const {
  if (!is_contiguous()) throw_error("reshape of a non-contiguous tensor ", str());
  if (shape_numel(shape) != numel()) throw_error("cannot reshape ", str(), " to ", shape_str(shape));
  return Tensor(storage_, shape, dtype_, offset_);
}

Tensor Tensor::narrow(int64_t start, int64_t length) const {
  if (!(dim() >= 1 && start >= 0 && length >= 0 && start + length <= shape_[0]))
    throw_error("narrow(", start, ", ", length, ") out of range for ", str());
  Tensor t = *this;
  t.shape_[0] = length;
  t.offset_ = offset_ + start * strides_[0];
  return t;
}

Tensor Tensor::operator[](int64_t i) const {
  if (!(dim() >= 1 && i >= 0 && i < shape_[0])) throw_error("index ", i, " out of range for ", str());
  Tensor t = *this;
  t.offset_ = offset_ + i * strides_[0];
  t.shape_.erase(t.shape_.begin());
  t.strides_.erase(t.strides_.begin());
  return t;
}

std::string Tensor::str() const {
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " on " + device().str();
}

}  // namespace tfm

// A strided view of typed elements in a shared storage. Storage memory belongs to a device and is released by
// whoever allocated it (a backend, an mmap of a safetensors file); the tensor only keeps it alive.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tfm/core/device.h"
#include "tfm/core/dtype.h"

namespace tfm {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& shape);  // "[2, 3]"
// Host memory aligned for any vector unit tfm's CPU kernels use; throws std::bad_alloc, also for a large
// block the kernel says it cannot provide (which Linux would otherwise grant, and kill the process for when
// it is touched).
void* host_allocate(size_t bytes);
// What the kernel estimates can be allocated without swapping (MemAvailable), if it says.
std::optional<size_t> host_available_memory();
void host_free(void* p);
// Elements of a shape; a negative size or a product past int64 (sizes read from files) is a tfm::Error.
int64_t shape_numel(const Shape& shape);
// Bytes of a tensor of this shape and dtype, checked as shape_numel.
size_t shape_bytes(const Shape& shape, DType dtype);
// Bytes of the host tensors Tensor::cpu allocated that are alive now (views of mapped files are not counted).
size_t host_tensor_bytes();

class Storage {
 public:
  // `release` frees `data` when the last tensor referring to it goes; empty for borrowed memory.
  Storage(void* data, size_t bytes, Device device, std::function<void(void*)> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t bytes_;
  Device device_;
  std::function<void(void*)> release_;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype, int64_t offset = 0);

  // A zero-initialised host tensor; device tensors come from the backend (backend::empty).
  static Tensor cpu(const Shape& shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const { return shape_[d < 0 ? d + dim() : d]; }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device{}; }
  int64_t offset() const { return offset_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool is_contiguous() const;

  size_t byte_offset() const { return static_cast<size_t>(offset_) * dtype_size(dtype_); }
  // The first element's address; for host memory and devices with pointer addressing (not OpenCL buffers).
  void* raw() const { return static_cast<char*>(storage_->data()) + byte_offset(); }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }

  // Views sharing storage. reshape needs a contiguous tensor; narrow selects [start, start+length) of dim 0.
  Tensor reshape(const Shape& shape) const;
  Tensor narrow(int64_t start, int64_t length) const;
  Tensor operator[](int64_t i) const;  // select along dim 0, dropping it

  std::string str() const;  // "bfloat16[2, 3] on cpu"

  // Whether this tensor starts in `before`'s storage right where `before` ends, both contiguous and of one
  // dtype: the two make one span of memory (the optimizer's runs, LoRA's stacked A).
  bool lies_right_after(const Tensor& before) const;

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;  // in elements
  DType dtype_ = DType::float32;
  int64_t offset_ = 0;  // in elements
};

}  // namespace tfm

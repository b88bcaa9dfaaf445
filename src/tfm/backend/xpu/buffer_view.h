// A tensor's bytes as a buffer of their own, for APIs that take a cl_mem without an offset (oneDNN's OpenCL
// interop): a sub-buffer of the tensor's storage. OpenCL places a sub-buffer only at an origin that is a
// multiple of the device's CL_DEVICE_MEM_BASE_ADDR_ALIGN, so a tensor that starts elsewhere has no view.
#pragma once

#include <cstddef>
#include <string_view>

#include "tfm/backend/xpu/opencl.h"
#include "tfm/core/tensor.h"

namespace tfm::xpu {

// CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes (the device reports it in bits).
size_t sub_buffer_alignment(cl_device_id device);

// Whether `t` (on an xpu device, with elements) starts a multiple of `alignment` bytes into its buffer.
bool has_buffer_view(const Tensor& t, size_t alignment);

// A sub-buffer over exactly the bytes of `t`, which has a view (has_buffer_view); `where` names the device in
// errors. Commands already enqueued with it keep it alive when the handle is dropped.
ClBuffer buffer_view(const Tensor& t, size_t alignment, std::string_view where);

}  // namespace tfm::xpu

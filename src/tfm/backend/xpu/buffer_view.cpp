#include "tfm/backend/xpu/buffer_view.h"

#include <string>

#include "tfm/core/error.h"

namespace tfm::xpu {

size_t sub_buffer_alignment(cl_device_id device) {
  return device_value<cl_uint>(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, "CL_DEVICE_MEM_BASE_ADDR_ALIGN") / 8;
}

bool has_buffer_view(const Tensor& t, size_t alignment) {
  return t.numel() > 0 && t.byte_offset() % alignment == 0;
}

ClBuffer buffer_view(const Tensor& t, size_t alignment, std::string_view where) {
  check(has_buffer_view(t, alignment), where, ": tensor ", t.str(), " at byte ", t.byte_offset(),
        " of its buffer has no sub-buffer: the device places them at multiples of ", alignment, " bytes");
  const cl_buffer_region region{t.byte_offset(), t.nbytes()};
  cl_int status = CL_SUCCESS;
  // Flags 0: the sub-buffer has its parent's access flags.
  ClBuffer view(clCreateSubBuffer(static_cast<cl_mem>(t.storage()->data()), 0, CL_BUFFER_CREATE_TYPE_REGION,
                                  &region, &status));
  cl_check(status, "clCreateSubBuffer", where);
  return view;
}

}  // namespace tfm::xpu

// The OpenCL C sources of kernels/, embedded at build time (embed_kernel.cmake); one constant per file.
#pragma once

namespace tfm::xpu::kernel_sources {

extern const char* const common;     // kernels/common.cl: work-group reductions, prepended to every program
extern const char* const pointwise;  // kernels/pointwise.cl: row copies, pointwise ops, RMSNorm
extern const char* const linear;     // kernels/linear.cl: tiled and few-row matmul
extern const char* const attention;  // kernels/attention.cl: paged attention, eager and one-pass

}  // namespace tfm::xpu::kernel_sources

// The OpenCL C sources of kernels/, embedded at build time (embed_kernel.cmake); one constant per file.
#pragma once

namespace tfm::xpu::kernel_sources {

extern const char* const common;     // kernels/common.cl: storage macros, reductions; before every program
extern const char* const copy;       // kernels/copy.cl: row copies, by element size
extern const char* const cast;       // kernels/cast.cl: dtype conversion
extern const char* const pointwise;  // kernels/pointwise.cl: pointwise ops, RMSNorm, their backward
extern const char* const linear;     // kernels/linear.cl: tiled and few-row matmul
extern const char* const intel_gemv;  // kernels/intel_gemv.cl: sub-group matmul of a few rows (Intel)
extern const char* const intel_dpas;  // kernels/intel_dpas.cl: DPAS matmul, bf16 and f16 (Intel XMX)
extern const char* const attention;  // kernels/attention.cl: paged attention, eager and flash
extern const char* const attention_backward;  // kernels/attention_backward.cl: attention's backward
extern const char* const sampling;   // kernels/sampling.cl: choosing each row's token
extern const char* const training;   // kernels/training.cl: matmul backward, loss, optimizer

}  // namespace tfm::xpu::kernel_sources

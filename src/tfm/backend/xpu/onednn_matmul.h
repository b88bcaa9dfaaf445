// op::Linear (y = x @ w^T + bias) through oneDNN's matmul on Intel GPUs. oneDNN's engine wraps each device's
// own cl_context and cl_device, and its stream the device's in-order queue, so oneDNN's GEMMs run in order
// with tfm's kernels. oneDNN 2.6 serves Intel GPUs only: a device it refuses (PoCL, NVIDIA) is asked once,
// the refusal is logged once, and that device's linears stay on tfm's own kernels.
//
// oneDNN's buffers take no offset (its GPU GEMMs ignore a memory descriptor's offset0), so each tensor is
// passed as a sub-buffer (buffer_view.h); a tensor at an offset the device cannot place one at is left to
// tfm's kernels. GEMMs are cached per (device, dtype, M, K, N, bias): oneDNN 2.6's GPU GEMMs refuse a
// run-time M (DNNL_RUNTIME_DIM_VAL), which only its slow reference matmul would take.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "tfm/backend/onednn_linear.h"
#include "tfm/backend/op_set.h"

namespace tfm::xpu {

class XpuBackend;

// The matmul of a Linear on `engine`, with the bias added inside it when `with_bias`; nullopt where oneDNN
// has no implementation there but its reference one, or none that accumulates in float32.
std::optional<dnnl::matmul> linear_matmul(const dnnl::engine& engine, const LinearDescs& descs,
                                          bool with_bias);

class OneDnnLinear {
 public:
  // Linears on the devices of `backend`, which must outlive this. Nothing is asked of oneDNN before use.
  explicit OneDnnLinear(XpuBackend& backend);
  ~OneDnnLinear();

  // Why oneDNN does not serve xpu:`index`, or empty when it does.
  std::string refusal(int index);
  // Whether run() takes `a`: its device is served, oneDNN has a GEMM for its dtype and shape, and every
  // tensor has a sub-buffer.
  bool accepts(const op::Linear& a);
  // Enqueues `a` on its device's queue; a tfm::Error when it is not accepted.
  void run(const op::Linear& a);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The instance the kernel registry runs, for the process-wide backend (xpu_backend()).
OneDnnLinear& onednn_linear();

}  // namespace tfm::xpu

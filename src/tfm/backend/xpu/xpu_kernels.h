// The xpu backend's kernels of the op set (op_set.h): the OpenCL C programs of kernels/*.cl, built once per
// device and dtype through the device's ProgramCache and launched on its in-order queue. Launches do not
// wait; copies to the host (in order on the same queue) and synchronize() do.
//
// The kernel registry holds plain function pointers, so the registered kernels (register_kernels in
// xpu_backend.h) run through one process-wide XpuKernels, xpu_kernels(). Other instances exist for tests that
// need another limit on the eager attention's scratch.
#pragma once

#include <cstddef>
#include <memory>

#include "tfm/backend/op_set.h"
#include "tfm/backend/xpu/intel_linear.h"

namespace tfm::xpu {

class XpuBackend;

// The eager attention keeps its scores in a scratch buffer of at most this many bytes (or one query row's),
// running as many rows at a time as fit.
inline constexpr size_t kDefaultScoresBytes = size_t{64} << 20;

// How paged attention is computed: flash (one pass, the default: tiles for prefill, split rows for decode, on
// Intel sub-groups where the device has them), eager (Transformers' scores), or intel_subgroup
// (attention_subgroup for every row, as a variant to test).
enum class AttentionForm { flash, eager, intel_subgroup };

class XpuKernels {
 public:
  // Kernels for the devices of `backend`, which must outlive them. OpenCL is not touched before an op runs.
  explicit XpuKernels(XpuBackend& backend, size_t scores_bytes = kDefaultScoresBytes);
  ~XpuKernels();

  // Each op in the dtype of its tensors, on their device.
  void run(const op::Embedding& a);
  void run(const op::GatherRows& a);
  void run(const op::SplitColumns& a);
  void run(const op::KvCacheWrite& a);
  // linear: Intel's sub-group or DPAS kernel where the device and shape allow (intel_linear.h), else portable.
  void run(const op::Linear& a, LinearVariant variant = LinearVariant::automatic);
  void run(const op::NormLinear& a);  // for a few rows (norm_linear_fits)
  void run(const op::LinearAdd& a);   // a LoRA adapter's product added into its base layer's output
  void run(const op::RmsNorm& a);
  void run(const op::AddRmsNorm& a);  // the fused kernel; the registry's default is add then rms_norm
  void run(const op::Rope& a);
  void run(const op::QkvRopeCache& a);
  void run(const op::ArgmaxRows& a);
  void run(const op::SiluMul& a);
  void run(const op::Add& a);
  void run(const op::Cast& a);
  void run(const op::PagedAttention& a, AttentionForm form);
  void run(const op::QkvAttention& a, AttentionForm form);  // flash or intel_subgroup (qkv_attention_fits)
  void run(const op::ConcatColumns& a);
  void run(const op::AddScaledColumns& a);
  void run(const op::Dropout& a);
  void run(const op::SampleRows& a);
  // Training (op_set.h): the backward ops, the loss and the optimizer step.
  void run(const op::LinearBackward& a);
  void run(const op::RmsNormBackward& a);
  void run(const op::SiluMulBackward& a);
  void run(const op::EmbeddingBackward& a);
  void run(const op::AttentionBackward& a);
  void run(const op::CrossEntropy& a);
  void run(const op::SumSquares& a);
  void run(const op::AdamW& a);

 private:
  struct Devices;  // per device: the cl_kernels and a scratch buffer (attention scores, partial sums)
  std::unique_ptr<Devices> devices_;
};

// The kernels the registry runs, for the process-wide backend (xpu_backend()).
XpuKernels& xpu_kernels();

}  // namespace tfm::xpu

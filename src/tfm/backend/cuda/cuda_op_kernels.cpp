// The CUDA backend's op kernels: unpack tensors, call the kernels of kernels.h, and run matmuls through
// cuBLAS (plain float32: TF32 stays off so results compare with the CPU within float32 rounding).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "tfm/backend/cuda/cuda_backend.h"
#include "tfm/backend/cuda/kernels.h"
#include "tfm/backend/pointer_args.h"
#include "tfm/core/error.h"

namespace tfm {
namespace {

void ok(cuda::Status status) {
  if (status[0] != '\0') throw_error(status);
}

cublasHandle_t handle_for_current_device() {
  static std::mutex mutex;
  static std::map<int, cublasHandle_t> handles;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) throw_error("cudaGetDevice failed");
  std::lock_guard<std::mutex> lock(mutex);
  auto it = handles.find(device);
  if (it == handles.end()) {
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw_error("cuda:", device, ": cublasCreate failed");
    cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH);
    it = handles.emplace(device, h).first;
  }
  return it->second;
}

// Kernels run on the device the tensors live on.
void use_device_of(const Tensor& t) {
  if (cudaSetDevice(t.device().index_or_zero()) != cudaSuccess)
    throw_error("cudaSetDevice failed for ", t.device().str());
}

class CudaOpKernels final : public OpKernels {
 public:
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    use_device_of(out);
    ok(cuda::embedding(table.data<float>(), ids.data<int32_t>(), ids.size(0), table.size(1),
                       out.data<float>()));
  }
  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) override {
    use_device_of(y);
    const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
    if (M == 0) return;
    // Row-major y (M, N) = x (M, K) @ w (N, K)^T is column-major y^T = w x^T.
    const float one = 1.f, zero = 0.f;
    const cublasStatus_t status =
        cublasSgemm(handle_for_current_device(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N),
                    static_cast<int>(M), static_cast<int>(K), &one, w.data<float>(), static_cast<int>(K),
                    x.data<float>(), static_cast<int>(K), &zero, y.data<float>(), static_cast<int>(N));
    check(status == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed with status ", static_cast<int>(status),
          " for ", x.str(), " @ ", w.str(), "^T");
    if (bias.defined()) ok(cuda::add_bias_rows(y.data<float>(), bias.data<float>(), M, N));
  }
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    use_device_of(out);
    const int64_t D = weight.size(0);
    ok(cuda::rms_norm(x.data<float>(), weight.data<float>(), x.numel() / D, D, eps, out.data<float>()));
  }
  void rope_(Tensor& x, const Tensor& cos, const Tensor& sin) override {
    use_device_of(x);
    ok(cuda::rope(x.data<float>(), cos.data<float>(), sin.data<float>(), x.size(0), x.size(1), x.size(2),
                  cos.size(1)));
  }
  void silu_mul(const Tensor& gate_up, Tensor& out) override {
    use_device_of(out);
    ok(cuda::silu_mul(gate_up.data<float>(), out.size(0), out.size(1), out.data<float>()));
  }
  void add_(Tensor& x, const Tensor& y) override {
    use_device_of(x);
    ok(cuda::add_inplace(x.data<float>(), y.data<float>(), x.numel()));
  }
  void split_columns(const Tensor& x, std::span<Tensor* const> outs) override {
    use_device_of(x);
    const ColumnSplit s = column_split(outs, x.size(0));
    ok(cuda::split_columns(x.data<float>(), x.size(0), s.outs.data(), s.widths.data(),
                           static_cast<int64_t>(s.outs.size())));
  }
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override {
    use_device_of(out);
    ok(cuda::gather_rows(x.data<float>(), x.size(1), rows.data<int32_t>(), rows.size(0), out.data<float>()));
  }
  void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& cache_k,
                      Tensor& cache_v) override {
    use_device_of(k);
    const int64_t T = k.size(0);
    ok(cuda::kv_cache_write(k.data<float>(), v.data<float>(), slots.data<int32_t>(), T, T ? k.numel() / T : 0,
                            cache_k.data<float>(), cache_v.data<float>()));
  }
  void paged_attention(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v,
                       const AttentionMetadata& meta, float scale, int64_t window, bool materialize_scores,
                       Tensor& out) override {
    use_device_of(q);
    ok(cuda::paged_attention(paged_attention_args(q, cache_k, cache_v, meta, scale, window, out),
                             materialize_scores));
  }
};

}  // namespace

OpKernels& cuda_op_kernels() {
  static CudaOpKernels kernels;
  return kernels;
}

}  // namespace tfm

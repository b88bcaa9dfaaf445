// The CUDA matmul, y = x @ w^T + bias: a few rows through tfm's GEMV (gemv.cu), more through cuBLASLt: x, w, y and the bias in the op's dtype; float32
// accumulation in every dtype (CUBLAS_COMPUTE_32F, which never rounds inputs to TF32, so float32 stays exact
// float32); the bias added by the epilogue before the output's one rounding. Split-K plans may only reduce
// their partial sums in float32: none that adds parts up in the output's dtype (a rounding per part).
#include <bit>
#include <map>
#include <memory>
#include <mutex>

#include "tfm/backend/cuda/cublas_lt.h"
#include "tfm/backend/cuda/cuda_backend.h"
#include "tfm/backend/cuda/launchers.h"
#include "tfm/backend/cuda/runtime.h"
#include "tfm/backend/op_set.h"
#include "tfm/core/floats.h"

namespace tfm::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // what cuBLAS itself takes on Hopper

cudaDataType_t cuda_type(DType d) {
  return d == DType::float32 ? CUDA_R_32F : d == DType::bfloat16 ? CUDA_R_16BF : CUDA_R_16F;
}

// How far an address is aligned, up to the 256 bytes cuBLASLt assumes unless told otherwise.
uint32_t alignment(const void* p) {
  return 1u << std::min(8, std::countr_zero(reinterpret_cast<uintptr_t>(p) | 256));
}

// Everything a plan depends on: the heuristic's choice depends on the shape, the dtype and how the buffers
// are aligned (views start anywhere).
struct PlanKey {
  int device;
  int64_t M, K, N;
  DType dtype;
  bool bias;
  uint32_t x_alignment, w_alignment, y_alignment, bias_alignment;
  auto operator<=>(const PlanKey&) const = default;
};

struct Plan {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t w, x, y;
  cublasLtMatmulAlgo_t algo;
};

// cuBLASLt's state: a handle and a workspace per device, a plan per PlanKey, kept for the process (creating a
// plan costs more than a decode step's matmul). The mutex also covers the bias pointer, which is set on a
// cached descriptor for each call.
class Matmuls {
 public:
  static Matmuls& get() {
    static Matmuls instance;
    return instance;
  }

  void run(const op::Linear& a) {
    const int64_t M = a.x.size(0), K = a.x.size(1), N = a.w.size(0);
    const int device = a.y.device().index_or_zero();
    const void* bias = a.bias.defined() ? a.bias.raw() : nullptr;
    const PlanKey key{device,
                      M,
                      K,
                      N,
                      a.dtype(),
                      bias != nullptr,
                      alignment(a.x.raw()),
                      alignment(a.w.raw()),
                      alignment(a.y.raw()),
                      alignment(bias)};
    use_device(device);
    std::lock_guard lock(mutex_);
    const CublasLt& lt = cublas_lt();
    const DeviceState& state = device_state(lt, device);
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, plan(lt, state, key, bias)).first;
    const Plan& p = it->second;
    if (bias) set(lt, p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    const float one = 1.f, zero = 0.f;
    lt.check(lt.matmul(state.handle, p.desc, &one, a.w.raw(), p.w, a.x.raw(), p.x, &zero, a.y.raw(), p.y,
                       a.y.raw(), p.y, &p.algo, state.workspace, kWorkspaceBytes, stream(device)),
             "cublasLtMatmul");
  }

 private:
  struct DeviceState {
    cublasLtHandle_t handle;
    void* workspace;
  };

  const DeviceState& device_state(const CublasLt& lt, int device) {
    auto it = devices_.find(device);
    if (it != devices_.end()) return it->second;
    DeviceState state{};
    lt.check(lt.create(&state.handle), "cublasLtCreate");
    check_cuda(cudaMalloc(&state.workspace, kWorkspaceBytes), "cudaMalloc of the cuBLASLt workspace");
    return devices_.emplace(device, state).first->second;
  }

  template <typename Value>
  static void set(const CublasLt& lt, cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                  const Value& value) {
    lt.check(lt.matmul_desc_set_attribute(desc, attribute, &value, sizeof value),
             "cublasLtMatmulDescSetAttribute");
  }
  template <typename Value>
  static void set(const CublasLt& lt, cublasLtMatmulPreference_t preference,
                  cublasLtMatmulPreferenceAttributes_t attribute, const Value& value) {
    lt.check(lt.preference_set_attribute(preference, attribute, &value, sizeof value),
             "cublasLtMatmulPreferenceSetAttribute");
  }

  // Row-major y (M, N) = x (M, K) @ w (N, K)^T is column-major y^T (N x M) = w^T x^T, with w a column-major
  // K x N matrix (transposed by the op) and x a column-major K x M one.
  static Plan plan(const CublasLt& lt, const DeviceState& state, const PlanKey& key, const void* bias) {
    const cudaDataType_t type = cuda_type(key.dtype);
    const auto M = static_cast<uint64_t>(key.M), K = static_cast<uint64_t>(key.K),
               N = static_cast<uint64_t>(key.N);
    Plan p{};
    lt.check(lt.matmul_desc_create(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    set(lt, p.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    if (bias) {
      set(lt, p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
      set(lt, p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);  // the heuristic reads its alignment
    }
    lt.check(lt.matrix_layout_create(&p.w, type, K, N, key.K), "cublasLtMatrixLayoutCreate");
    lt.check(lt.matrix_layout_create(&p.x, type, K, M, key.K), "cublasLtMatrixLayoutCreate");
    lt.check(lt.matrix_layout_create(&p.y, type, N, M, key.N), "cublasLtMatrixLayoutCreate");
    cublasLtMatmulPreference_t created;
    lt.check(lt.preference_create(&created), "cublasLtMatmulPreferenceCreate");
    const std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, decltype(lt.preference_destroy)> owned(
        created, lt.preference_destroy);
    cublasLtMatmulPreference_t preference = owned.get();
    set(lt, preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t{kWorkspaceBytes});
    set(lt, preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
        uint32_t{CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE});
    set(lt, preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.w_alignment);
    set(lt, preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.x_alignment);
    set(lt, preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.y_alignment);
    set(lt, preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.y_alignment);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    lt.check(lt.algo_get_heuristic(state.handle, p.desc, p.w, p.x, p.y, p.y, preference, 1, &result, &found),
             "cublasLtMatmulAlgoGetHeuristic");
    check(found > 0, "cuBLASLt has no ", dtype_name(key.dtype), " matmul for ", key.M, "x", key.K, " @ (",
          key.N, "x", key.K, ")^T", bias ? " with a bias" : "", " on cuda:", key.device);
    p.algo = result.algo;
    return p;
  }

  std::mutex mutex_;
  std::map<int, DeviceState> devices_;
  std::map<PlanKey, Plan> plans_;
};

void cublaslt(const op::Linear& a) {
  if (a.x.size(0) == 0 || a.w.size(0) == 0) return;
  Matmuls::get().run(a);
}

template <typename T>
bool gemv_takes(const op::Linear& a) {
  return launch::gemv_takes(a.x.data<T>(), a.w.data<T>(), a.x.size(0), a.x.size(1));
}

template <typename T>
void gemv(const op::Linear& a) {
  use_device(a.y.device().index_or_zero());
  launch::gemv(a.x.data<T>(), a.w.data<T>(), a.bias.defined() ? a.bias.data<T>() : nullptr, a.y.data<T>(),
               a.x.size(0), a.x.size(1), a.w.size(0));
}

// A few rows (decode) through the GEMV, which reads the weights at the memory's rate where cuBLASLt's tiles
// are mostly empty; more rows through cuBLASLt.
template <typename T>
void linear(const op::Linear& a) {
  gemv_takes<T>(a) ? gemv<T>(a) : cublaslt(a);
}

}  // namespace

void register_linear_kernels(KernelRegistry& r) {
  for (DType d : kComputeDTypes) {
    visit_float(d, [&]<typename T>() {
      r.add<op::Linear>(DeviceType::cuda, d, "default", {.run = linear<T>, .is_default = true});
      r.add<op::Linear>(DeviceType::cuda, d, "gemv", {.run = gemv<T>, .supports = gemv_takes<T>});
    });
    r.add<op::Linear>(DeviceType::cuda, d, "cublaslt", {.run = cublaslt});
  }
}

}  // namespace tfm::cuda

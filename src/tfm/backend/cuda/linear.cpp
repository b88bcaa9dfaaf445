// The CUDA matmuls: y = x @ w^T + bias, a few rows through tfm's GEMV (gemv.cu), more through cuBLASLt; and
// linear's backward through cuBLASLt. x, w, y and the bias in the op's dtype; float32
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
#include "tfm/backend/pointer_args.h"
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

// One matmul in row-major terms: d (m, n) = a (m, k) @ b (k, n) [+ bias (n)] [+ d], where a is stored (k, m)
// when a_transposed and b is stored (n, k) when b_transposed; a and b in `in` dtype, d and bias in `out`.
struct Gemm {
  int device;
  int64_t m, n, k;
  const void* a;
  bool a_transposed;
  const void* b;
  bool b_transposed;
  void* d;
  const void* bias;  // or null
  DType in, out;
  bool accumulate;  // d += the product, else d = it
};

// Everything a plan depends on: the heuristic's choice depends on the shape, the dtypes and how the buffers
// are aligned (views start anywhere).
struct PlanKey {
  int device;
  int64_t m, n, k;
  bool a_transposed, b_transposed;
  DType in, out;
  bool bias, accumulate;
  uint32_t a_alignment, b_alignment, d_alignment, bias_alignment;
  auto operator<=>(const PlanKey&) const = default;
};

struct Plan {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t b, a, d;
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

  void run(const Gemm& g) {
    const PlanKey key{g.device,          g.m,          g.n,
                      g.k,               g.a_transposed, g.b_transposed,
                      g.in,              g.out,        g.bias != nullptr,
                      g.accumulate,      alignment(g.a), alignment(g.b),
                      alignment(g.d),    alignment(g.bias)};
    use_device(g.device);
    std::lock_guard lock(mutex_);
    const CublasLt& lt = cublas_lt();
    const DeviceState& state = device_state(lt, g.device);
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, plan(lt, state, key, g.bias)).first;
    const Plan& p = it->second;
    if (g.bias) set(lt, p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
    const float one = 1.f, beta = g.accumulate ? 1.f : 0.f;
    lt.check(lt.matmul(state.handle, p.desc, &one, g.b, p.b, g.a, p.a, &beta, g.d, p.d, g.d, p.d, &p.algo,
                       state.workspace, kWorkspaceBytes, stream(g.device)),
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

  // Row-major d (m, n) = a (m, k) @ b (k, n) is column-major d^T (n x m) = b^T a^T. A row-major matrix stored
  // (r, c) reads as a column-major c x r one, so b stored (k, n) is b^T as it is, and b stored (n, k) is b^T
  // after cuBLASLt's transpose; likewise a.
  static Plan plan(const CublasLt& lt, const DeviceState& state, const PlanKey& key, const void* bias) {
    const auto m = static_cast<uint64_t>(key.m), n = static_cast<uint64_t>(key.n), k = static_cast<uint64_t>(key.k);
    Plan p{};
    lt.check(lt.matmul_desc_create(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    set(lt, p.desc, CUBLASLT_MATMUL_DESC_TRANSA, key.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
    set(lt, p.desc, CUBLASLT_MATMUL_DESC_TRANSB, key.a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
    if (bias) {
      set(lt, p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
      set(lt, p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);  // the heuristic reads its alignment
    }
    const cudaDataType_t in = cuda_type(key.in), out = cuda_type(key.out);
    lt.check(key.b_transposed ? lt.matrix_layout_create(&p.b, in, k, n, k) : lt.matrix_layout_create(&p.b, in, n, k, n),
             "cublasLtMatrixLayoutCreate");
    lt.check(key.a_transposed ? lt.matrix_layout_create(&p.a, in, m, k, m) : lt.matrix_layout_create(&p.a, in, k, m, k),
             "cublasLtMatrixLayoutCreate");
    lt.check(lt.matrix_layout_create(&p.d, out, n, m, n), "cublasLtMatrixLayoutCreate");
    cublasLtMatmulPreference_t created;
    lt.check(lt.preference_create(&created), "cublasLtMatmulPreferenceCreate");
    const std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, decltype(lt.preference_destroy)> owned(
        created, lt.preference_destroy);
    cublasLtMatmulPreference_t preference = owned.get();
    set(lt, preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t{kWorkspaceBytes});
    set(lt, preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
        uint32_t{CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE});
    set(lt, preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.b_alignment);
    set(lt, preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.a_alignment);
    set(lt, preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.d_alignment);
    set(lt, preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.d_alignment);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    lt.check(lt.algo_get_heuristic(state.handle, p.desc, p.b, p.a, p.d, p.d, preference, 1, &result, &found),
             "cublasLtMatmulAlgoGetHeuristic");
    check(found > 0, "cuBLASLt has no ", dtype_name(key.in), " to ", dtype_name(key.out), " matmul of (", key.m,
          "x", key.k, ") @ (", key.k, "x", key.n, ")", bias ? " with a bias" : "", " on cuda:", key.device);
    p.algo = result.algo;
    return p;
  }

  std::mutex mutex_;
  std::map<int, DeviceState> devices_;
  std::map<PlanKey, Plan> plans_;
};

void cublaslt(const op::Linear& a) {
  if (a.x.size(0) == 0 || a.w.size(0) == 0) return;
  Matmuls::get().run({a.y.device().index_or_zero(), a.x.size(0), a.w.size(0), a.x.size(1), a.x.raw(), false,
                      a.w.raw(), true, a.y.raw(), raw_or_null(a.bias), a.dtype(), a.dtype(),
                      false});
}

// y += x w^T (or x w): cuBLASLt's beta of 1, the product added in float32 before the one rounding.
void linear_add(const op::LinearAdd& a) {
  if (a.x.size(0) == 0 || a.N() == 0 || a.x.size(1) == 0) return;
  Matmuls::get().run({a.y.device().index_or_zero(), a.x.size(0), a.N(), a.x.size(1), a.x.raw(), false,
                      a.w.raw(), !a.w_by_columns, a.y.raw(), nullptr, a.dtype(), a.dtype(), true});
}

template <typename T>
launch::Gemv<T> gemv_of(const op::Linear& a) {
  return {a.x.data<T>(), a.w.data<T>(), data_or_null<T>(a.bias), a.y.data<T>(), a.x.size(0), a.x.size(1),
          a.w.size(0)};
}

template <typename T>
launch::Gemv<T> gemv_of(const op::NormLinear& a) {
  const bool normed = a.norm_weight.defined();
  return {.x = normed ? nullptr : a.residual.data<T>(),
          .w = a.w.data<T>(),
          .bias = data_or_null<T>(a.bias),
          .y = a.y.data<T>(),
          .M = a.residual.size(0),
          .K = a.residual.size(1),
          .N = a.w.size(0),
          .residual = normed ? a.residual.data<T>() : nullptr,
          .pending = data_or_null<T>(a.x),
          .norm_weight = data_or_null<T>(a.norm_weight),
          .eps = a.eps,
          .residual_out = data_or_null<T>(a.residual_out),
          .gated = a.gated};
}

// linear, or norm_linear (the norm and the SiLU gate folded in), through the GEMV.
template <typename T, typename Op>
bool gemv_takes(const Op& a) {
  return launch::gemv_takes(gemv_of<T>(a));
}

template <typename T, typename Op>
void gemv(const Op& a) {
  use_device(a.y.device().index_or_zero());
  launch::gemv(gemv_of<T>(a));
}

// A few rows (decode) through the GEMV, which reads the weights at the memory's rate where cuBLASLt's tiles
// are mostly empty; more rows through cuBLASLt.
template <typename T>
void linear(const op::Linear& a) {
  gemv_takes<T>(a) ? gemv<T>(a) : cublaslt(a);
}

// dx = dy @ w and dw += dy^T @ x through cuBLASLt (dw straight into its float32 accumulator), dbias += the
// column sums of dy.
template <typename T>
void linear_backward(const op::LinearBackward& a) {
  const int device = a.dy.device().index_or_zero();
  const int64_t M = a.x.size(0), K = a.x.size(1), N = a.w.size(0);
  if (M == 0) return;
  if (a.dx.defined())
    Matmuls::get().run({device, M, K, N, a.dy.raw(), false, a.w.raw(), false, a.dx.raw(), nullptr, a.dtype(),
                        a.dtype(), false});
  if (a.dw.defined())
    Matmuls::get().run({device, N, K, M, a.dy.raw(), true, a.x.raw(), false, a.dw.raw(), nullptr, a.dtype(),
                        DType::float32, true});
  if (a.dbias.defined()) {
    use_device(device);
    launch::column_sums(a.dy.data<T>(), M, N, a.dbias.data<float>());
  }
}

}  // namespace

void register_linear_kernels(KernelRegistry& r) {
  for (DType d : kComputeDTypes) {
    visit_float(d, [&]<typename T>() {
      r.add<op::Linear>(DeviceType::cuda, d, "default", {.run = linear<T>, .is_default = true});
      r.add<op::Linear>(DeviceType::cuda, d, "gemv", {.run = gemv<T, op::Linear>, .supports = gemv_takes<T, op::Linear>});
      r.add<op::NormLinear>(DeviceType::cuda, d, "fused",
                            {.run = gemv<T, op::NormLinear>, .supports = gemv_takes<T, op::NormLinear>,
                             .is_default = true});
    });
    r.add<op::Linear>(DeviceType::cuda, d, "cublaslt", {.run = cublaslt});
    r.add<op::LinearAdd>(DeviceType::cuda, d, "default", {.run = linear_add, .is_default = true});
    visit_float(d, [&]<typename T>() {
      r.add<op::LinearBackward>(DeviceType::cuda, d, "default", {.run = linear_backward<T>, .is_default = true});
    });
  }
}

}  // namespace tfm::cuda

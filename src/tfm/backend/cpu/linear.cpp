// The CPU's matmul, y = x @ w^T + bias. oneDNN runs it where it can for the dtype on this CPU (float32
// always; bfloat16 on CPUs with AVX-512 or AMX, where oneDNN picks those units at run time). Elsewhere the
// 16-bit dtypes take tfm's own paths, float32 accumulation either way: a few rows (decode steps) are dot
// products straight over the 16-bit weights, so each weight byte is read once, which is where bf16 halves a
// step's time; more rows convert blocks of the weights to float32 for oneDNN's float32 matmul, which the
// conversion costs little against.
#include <immintrin.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "tfm/backend/cpu/cpu_backend.h"
#include "tfm/backend/onednn_linear.h"
#include "tfm/backend/op_set.h"
#include "tfm/backend/pointer_args.h"
#include "tfm/core/floats.h"
#include "tfm/core/parallel.h"

namespace tfm::cpu {
namespace {

// A product c (M, N) = a (M, K) @ b (K, N) (+ bias (N)) in dtype d, row-major but where a_t (a stored (K, M))
// or b_t (b stored (N, K), a Linear's weights); with `accumulate`, added to c's values (oneDNN's sum
// post-op).
struct Product {
  int64_t M, K, N;
  DType d;
  bool a_t, b_t, bias, accumulate;
  auto operator<=>(const Product&) const = default;
};

// Linear's forward: y = x @ w^T (+ bias).
Product linear_product(int64_t M, int64_t K, int64_t N, DType d, bool bias) {
  return {M, K, N, d, false, true, bias, false};
}

// oneDNN matmul primitives by product, created once (creation costs far more than a decode step's small
// matmul); whether oneDNN has one for a dtype on this CPU is asked once.
class OneDnn {
 public:
  static OneDnn& get() {
    static OneDnn instance;
    return instance;
  }

  bool runs(DType d) {
    std::lock_guard lock(mutex_);
    auto it = runs_.find(d);
    if (it == runs_.end())
      it = runs_.emplace(d, create(linear_product(1, 64, 64, d, true)).has_value()).first;
    return it->second;
  }

  void run(const Product& p, const void* a, const void* b, const void* bias, void* c) {
    const LinearDescs descs = descs_of(p);
    std::lock_guard lock(mutex_);
    auto it = primitives_.find(p);
    if (it == primitives_.end()) {
      std::optional<dnnl::matmul> created = create(p);
      check(created.has_value(), "oneDNN has no ", dtype_name(p.d), " matmul for ", p.M, "x", p.K, " by ",
            p.K, "x", p.N, " on this CPU");
      it = primitives_.emplace(p, *created).first;
    }
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, dnnl::memory(descs.x, engine_, const_cast<void*>(a))},
        {DNNL_ARG_WEIGHTS, dnnl::memory(descs.w, engine_, const_cast<void*>(b))},
        {DNNL_ARG_DST, dnnl::memory(descs.y, engine_, c)}};
    if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(descs.bias, engine_, const_cast<void*>(bias)));
    it->second.execute(stream_, args);
    stream_.wait();
  }

 private:
  static LinearDescs descs_of(const Product& p) { return LinearDescs(p.d, p.M, p.K, p.N, p.a_t, p.b_t); }

  std::optional<dnnl::matmul> create(const Product& p) {
    try {
      dnnl::primitive_attr attr;
      if (p.accumulate) {
        dnnl::post_ops sum;
        sum.append_sum(1.f);
        attr.set_post_ops(sum);
      }
      return dnnl::matmul(dnnl::matmul::primitive_desc(descs_of(p).matmul(p.bias), attr, engine_));
    } catch (const dnnl::error&) {  // unimplemented for this dtype on this CPU
      return std::nullopt;
    }
  }

  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  std::mutex mutex_;
  std::map<DType, bool> runs_;
  std::map<Product, dnnl::matmul> primitives_;
};

// sum over k of x[k] * w[k], x in float32 and w in T, with sixteen running sums so that the compiler can
// keep them in vector registers; AVX2 with FMA and F16C where the CPU has them.
template <typename T>
float dot_portable(const float* x, const T* w, int64_t K) {
  float s[16] = {};
  int64_t k = 0;
  for (; k + 16 <= K; k += 16)
    for (int j = 0; j < 16; ++j) s[j] += x[k + j] * to_float(w[k + j]);
  for (; k < K; ++k) s[0] += x[k] * to_float(w[k]);
  float total = 0.f;
  for (float v : s) total += v;
  return total;
}

template <typename T>
__attribute__((target("avx2,fma,f16c"))) __m256 load8(const T* w) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_loadu_ps(w);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
  }
}

template <typename T>
__attribute__((target("avx2,fma,f16c"))) float dot_avx2(const float* x, const T* w, int64_t K) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), load8(w + k), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), load8(w + k + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 16), load8(w + k + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 24), load8(w + k + 24), s3);
  }
  for (; k + 8 <= K; k += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), load8(w + k), s0);
  const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  float total = _mm_cvtss_f32(h);
  for (; k < K; ++k) total += x[k] * to_float(w[k]);
  return total;
}

bool has_avx2() {
  static const bool yes =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return yes;
}

template <typename T>
std::vector<float> to_floats(const T* v, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  parallel_for(n, {.enabled = n > 65536}, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = to_float(v[i]);
  });
  return out;
}

// v's values as float32 for a float32 product: v itself when it is float32, else converted into `storage`.
template <typename T>
const float* float_values(const T* v, int64_t n, std::vector<float>& storage) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    storage = to_floats(v, n);
    return storage.data();
  }
}

constexpr int64_t kRowsPath = 8;  // up to this many rows of x take the dot-product path

template <typename T>
void linear_rows(const T* x, const T* w, const T* bias, T* y, int64_t M, int64_t K, int64_t N) {
  const std::vector<float> xf = to_floats(x, M * K);
  const bool avx2 = has_avx2();
  parallel_for(N, {}, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const T* wn = w + n * K;
      const float b = bias ? to_float(bias[n]) : 0.f;
      for (int64_t m = 0; m < M; ++m) {
        const float* xm = xf.data() + m * K;
        y[m * N + n] = from_float<T>((avx2 ? dot_avx2(xm, wn, K) : dot_portable(xm, wn, K)) + b);
      }
    }
  });
}

template <typename T>
void linear_blocks(const T* x, const T* w, const T* bias, T* y, int64_t M, int64_t K, int64_t N) {
  const std::vector<float> xf = to_floats(x, M * K);
  const int64_t block = std::max<int64_t>(64, (int64_t{1} << 20) / std::max<int64_t>(K, 1) / 64 * 64);
  std::vector<float> wf(static_cast<size_t>(std::min(block, N) * K)), yf(static_cast<size_t>(M * std::min(block, N)));
  for (int64_t n0 = 0; n0 < N; n0 += block) {
    const int64_t nb = std::min(block, N - n0);
    parallel_for(nb * K, {}, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) wf[i] = to_float(w[n0 * K + i]);
    });
    OneDnn::get().run(linear_product(M, K, nb, DType::float32, false), xf.data(), wf.data(), nullptr,
                      yf.data());
    parallel_for(M, {.enabled = M * nb > 16384}, [&](int64_t begin, int64_t end) {
      for (int64_t m = begin; m < end; ++m) {
        for (int64_t j = 0; j < nb; ++j) {
          y[m * N + n0 + j] = from_float<T>(yf[m * nb + j] + (bias ? to_float(bias[n0 + j]) : 0.f));
        }
      }
    });
  }
}

template <typename T>
void linear(const op::Linear& a) {
  const int64_t M = a.x.size(0), K = a.x.size(1), N = a.w.size(0);
  if (M == 0 || N == 0) return;
  const T* bias = data_or_null<T>(a.bias);
  if (OneDnn::get().runs(dtype_of<T>())) {
    OneDnn::get().run(linear_product(M, K, N, dtype_of<T>(), bias != nullptr), a.x.raw(), a.w.raw(), bias,
                      a.y.raw());
  } else if (M <= kRowsPath) {
    linear_rows(a.x.data<T>(), a.w.data<T>(), bias, a.y.data<T>(), M, K, N);
  } else {
    linear_blocks(a.x.data<T>(), a.w.data<T>(), bias, a.y.data<T>(), M, K, N);
  }
}

// y[i] = start(n, i) + (x w^T)[i] (x w with w_by_columns) accumulated in float64 and rounded once, n being
// i's column: the plain definitions the other kernels are tested against.
template <typename T, typename Start>
void reference_product(const Tensor& x_in, const Tensor& w_in, Tensor& y_out, Start&& start,
                       bool w_by_columns = false) {
  const int64_t M = x_in.size(0), K = x_in.size(1), N = w_in.size(w_by_columns ? 1 : 0);
  const T* x = x_in.data<T>();
  const T* w = w_in.data<T>();
  T* y = y_out.data<T>();
  parallel_for(M * N, {.enabled = M * N * K > 1000000}, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t m = i / N, n = i % N;
      double acc = start(n, i);
      for (int64_t k = 0; k < K; ++k)
        acc += double{to_float(x[m * K + k])} * to_float(w[w_by_columns ? k * N + n : n * K + k]);
      y[i] = from_float<T>(static_cast<float>(acc));
    }
  });
}

template <typename T>
void linear_reference(const op::Linear& a) {
  const T* bias = data_or_null<T>(a.bias);
  reference_product<T>(a.x, a.w, a.y, [&](int64_t n, int64_t) { return bias ? to_float(bias[n]) : 0.f; });
}

// y += x w^T (or x w): the product in float32 (oneDNN), added to y before the one rounding.
template <typename T>
void linear_add(const op::LinearAdd& a) {
  const int64_t M = a.x.size(0), K = a.x.size(1), N = a.N();
  if (M == 0 || N == 0 || K == 0) return;
  std::vector<float> x_storage, w_storage;
  const float* x = float_values(a.x.data<T>(), M * K, x_storage);
  const float* w = float_values(a.w.data<T>(), N * K, w_storage);
  std::vector<float> product(static_cast<size_t>(M * N));
  OneDnn::get().run({M, K, N, DType::float32, false, !a.w_by_columns, false, false}, x, w, nullptr,
                    product.data());
  T* y = a.y.data<T>();
  parallel_for(M * N, {.enabled = M * N > 16384}, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = from_float<T>(to_float(y[i]) + product[i]);
  });
}

// Linear's backward, its products in float32 through oneDNN: dx = dy @ w (rounded to T once), and dw += dy^T
// @ x straight into the float32 accumulator; dbias += the column sums of dy.
template <typename T>
void linear_backward(const op::LinearBackward& a) {
  const int64_t M = a.x.size(0), K = a.x.size(1), N = a.w.size(0);
  if (M == 0) return;
  std::vector<float> dy_storage, w_storage, x_storage;
  const float* dy = float_values(a.dy.data<T>(), M * N, dy_storage);
  if (a.dx.defined()) {
    const float* w = float_values(a.w.data<T>(), N * K, w_storage);
    const Product dx_product{M, N, K, DType::float32, false, false, false, false};
    if constexpr (std::is_same_v<T, float>) {
      OneDnn::get().run(dx_product, dy, w, nullptr, a.dx.data<float>());
    } else {
      std::vector<float> dx(static_cast<size_t>(M * K));
      OneDnn::get().run(dx_product, dy, w, nullptr, dx.data());
      T* out = a.dx.data<T>();
      parallel_for(M * K, {.enabled = M * K > 65536}, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] = from_float<T>(dx[i]);
      });
    }
  }
  if (a.dw.defined()) {
    const float* x = float_values(a.x.data<T>(), M * K, x_storage);
    OneDnn::get().run({N, M, K, DType::float32, true, false, false, true}, dy, x, nullptr,
                      a.dw.data<float>());
  }
  if (a.dbias.defined()) {
    float* dbias = a.dbias.data<float>();
    parallel_for(N, {.enabled = M * N > 65536}, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        float sum = 0.f;
        for (int64_t m = 0; m < M; ++m) sum += dy[m * N + n];
        dbias[n] += sum;
      }
    });
  }
}

template <typename T>
void linear_add_reference(const op::LinearAdd& a) {
  const T* y = a.y.data<T>();
  reference_product<T>(
      a.x, a.w, a.y, [&](int64_t, int64_t i) { return to_float(y[i]); }, a.w_by_columns);
}

}  // namespace

void register_linear_kernels(KernelRegistry& r) {
  for (DType d : kComputeDTypes) {
    visit_float(d, [&]<typename T>() {
      r.add<op::Linear>(DeviceType::cpu, d, "default", {.run = linear<T>, .is_default = true});
      r.add<op::Linear>(DeviceType::cpu, d, "reference", {.run = linear_reference<T>});
      r.add<op::LinearAdd>(DeviceType::cpu, d, "default", {.run = linear_add<T>, .is_default = true});
      r.add<op::LinearAdd>(DeviceType::cpu, d, "reference", {.run = linear_add_reference<T>});
      r.add<op::LinearBackward>(DeviceType::cpu, d, "default",
                                {.run = linear_backward<T>, .is_default = true});
    });
  }
}

}  // namespace tfm::cpu

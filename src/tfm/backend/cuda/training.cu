// The training kernels (op_set.h's training ops but linear's backward, which is cuBLASLt's, and attention's, in
// attention_backward.cu): each backward beside what it differentiates, the loss and AdamW, rounding as the CPU's
// training.cpp does. Parameter gradients add into their float32 accumulators with atomics, so their sums are not
// bit-reproducible from run to run (as torch's CUDA backward is not).
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"
#include "tfm/backend/sampling_math.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void column_sums_kernel(const T* x, int64_t rows, int64_t cols, float* sums) {
  for (int64_t c = first_index(); c < cols; c += grid_stride()) {
    float s = 0.f;
    for (int64_t r = 0; r < rows; ++r) s += to_float(x[r * cols + c]);
    sums[c] += s;
  }
}

// A block per row at a time, over a grid-stride loop of rows; dx may be dout (each element is read, then
// written, by one thread). Each thread sums its own elements' dweight terms over the block's rows in shared
// memory, and the block adds them to dweight once: one atomic per element a block, not a row (q/k norms have a
// row per token and head, and 128 elements).
template <typename T>
__global__ void rms_norm_backward_kernel(const T* x, const T* weight, const T* dout, int64_t rows, int64_t dim,
                                         float eps, T* dx, float* dweight) {
  __shared__ float shared[32];
  extern __shared__ float dweight_part[];  // dim floats when dweight is wanted
  if (dweight) {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dweight_part[i] = 0.f;
  }
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t offset = row * dim;
    float sum = 0.f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += to_float(x[offset + i]) * to_float(x[offset + i]);
    const float inv = 1.f / sqrtf(block_sum(sum, shared) / static_cast<float>(dim) + eps);
    float dot = 0.f;  // sum of dn * n
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      const float n = to_float(x[offset + i]) * inv, g = to_float(dout[offset + i]);
      dot += g * to_float(weight[i]) * n;
      if (dweight) dweight_part[i] += g * round_to<T>(n);
    }
    const float mean = block_sum(dot, shared) / static_cast<float>(dim);
    if (!dx) continue;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      const float n = to_float(x[offset + i]) * inv;
      dx[offset + i] = from_float<T>((to_float(dout[offset + i]) * to_float(weight[i]) - n * mean) * inv);
    }
  }
  if (dweight) {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) atomicAdd(dweight + i, dweight_part[i]);
  }
}

template <typename T>
__global__ void silu_mul_backward_kernel(const T* gate_up, const T* dout, int64_t inter, int64_t n, T* dgate_up) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t row = i / inter, j = i % inter;
    const float gate = to_float(gate_up[row * 2 * inter + j]), up = to_float(gate_up[row * 2 * inter + inter + j]);
    const float d = to_float(dout[i]), s = 1.f / (1.f + expf(-gate));
    dgate_up[row * 2 * inter + j] = from_float<T>(d * up * s * (1.f + gate * (1.f - s)));
    dgate_up[row * 2 * inter + inter + j] = from_float<T>(d * round_to<T>(gate * s));
  }
}

template <typename T>
__global__ void embedding_backward_kernel(const int32_t* ids, const T* dout, int64_t hidden, int64_t n,
                                          float* dtable) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    atomicAdd(dtable + int64_t{ids[i / hidden]} * hidden + i % hidden, to_float(dout[i]));
}

// One block per row; dlogits may be logits: the label's logit is read before any is written.
template <typename T>
__global__ void cross_entropy_kernel(const T* logits, const int32_t* labels, int64_t vocab, float grad_scale,
                                     float* loss, T* dlogits) {
  __shared__ float shared[32];
  __shared__ float label_logit;
  const T* x = logits + blockIdx.x * vocab;
  T* d = dlogits + blockIdx.x * vocab;
  const int32_t label = labels[blockIdx.x];
  if (label == kIgnoreLabel) {
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) d[i] = from_float<T>(0.f);
    return;
  }
  if (threadIdx.x == 0) label_logit = to_float(x[label]);
  float max = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) max = fmaxf(max, to_float(x[i]));
  max = block_max(max, shared);
  float sum = 0.f;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) sum += expf(to_float(x[i]) - max);
  const float log_sum = logf(block_sum(sum, shared));  // its barriers also publish label_logit
  if (threadIdx.x == 0) atomicAdd(loss, log_sum - (label_logit - max));
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float p = expf(to_float(x[i]) - max - log_sum);
    d[i] = from_float<T>((p - (i == label ? 1.f : 0.f)) * grad_scale);
  }
}

__global__ void sum_squares_kernel(const float* x, int64_t n, float* out) {
  __shared__ float shared[32];
  float s = 0.f;
  for (int64_t i = first_index(); i < n; i += grid_stride()) s += x[i] * x[i];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) atomicAdd(out, s);
}

template <typename P>
__global__ void adamw_kernel(float* w, const float* grad, float* m, float* v, P* param, AdamWScalars s, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float g = grad[i] * s.grad_scale;
    w[i] *= s.decay;
    m[i] += (g - m[i]) * s.one_minus_beta1;
    v[i] = v[i] * s.beta2 + s.one_minus_beta2 * g * g;
    w[i] -= s.step_size * m[i] / (sqrtf(v[i]) / s.bias2_sqrt + s.eps);
    if (param) param[i] = from_float<P>(w[i]);
  }
}

template <typename T>
__global__ void add_scaled_columns_kernel(T* out, int64_t out_cols, int64_t out_column, const T* x, int64_t x_cols,
                                          int64_t x_column, int64_t width, float scale, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t r = i / width, c = i % width;
    T* o = out + r * out_cols + out_column + c;
    *o = from_float<T>(to_float(*o) + round_to<T>(scale * to_float(x[r * x_cols + x_column + c])));
  }
}

template <typename T>
__global__ void dropout_kernel(const T* x, float p, uint64_t seed, int64_t n, T* out) {
  const float keep_scale = 1.f / (1.f - p);
  const uint64_t key = splitmix64(seed);
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float u = static_cast<float>(splitmix64(key ^ static_cast<uint64_t>(i)) >> 40) * 0x1p-24f;
    out[i] = u >= p ? from_float<T>(to_float(x[i]) * keep_scale) : from_float<T>(0.f);
  }
}

}  // namespace

template <typename T>
void column_sums(const T* x, int64_t rows, int64_t cols, float* sums) {
  if (cols == 0) return;
  column_sums_kernel<<<grid_for(cols, kThreads), kThreads, 0, current_stream()>>>(on_device(x), rows, cols, sums);
  check_launch("linear_backward's bias");
}

template <typename T>
void rms_norm_backward(const T* x, const T* weight, const T* dout, int64_t rows, int64_t dim, float eps, T* dx,
                       float* dweight) {
  if (rows == 0 || dim == 0) return;
  // Enough blocks to fill the device several times over; each then takes rows / blocks rows.
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(rows, 2048));
  const size_t shared = dweight ? static_cast<size_t>(dim) * sizeof(float) : 0;
  check(shared <= 48 * 1024, "rms_norm_backward on cuda takes a dimension up to 12,288, not ", dim);
  rms_norm_backward_kernel<<<blocks, threads_for_row(dim), shared, current_stream()>>>(
      on_device(x), on_device(weight), on_device(dout), rows, dim, eps, on_device(dx), dweight);
  check_launch("rms_norm_backward");
}

template <typename T>
void silu_mul_backward(const T* gate_up, const T* dout, int64_t rows, int64_t inter, T* dgate_up) {
  const int64_t n = rows * inter;
  if (n == 0) return;
  silu_mul_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(
      on_device(gate_up), on_device(dout), inter, n, on_device(dgate_up));
  check_launch("silu_mul_backward");
}

template <typename T>
void embedding_backward(const int32_t* ids, const T* dout, int64_t rows, int64_t hidden, float* dtable) {
  const int64_t n = rows * hidden;
  if (n == 0) return;
  embedding_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(ids, on_device(dout), hidden,
                                                                                      n, dtable);
  check_launch("embedding_backward");
}

template <typename T>
void cross_entropy(const T* logits, const int32_t* labels, int64_t rows, int64_t vocab, float grad_scale,
                   float* loss, T* dlogits) {
  check_cuda(cudaMemsetAsync(loss, 0, sizeof(float), current_stream()), "cross_entropy's loss");
  if (rows == 0) return;
  cross_entropy_kernel<<<static_cast<unsigned>(rows), 1024, 0, current_stream()>>>(
      on_device(logits), labels, vocab, grad_scale, loss, on_device(dlogits));
  check_launch("cross_entropy");
}

void sum_squares(const float* x, int64_t n, float* out) {
  if (n == 0) return;
  sum_squares_kernel<<<std::min<unsigned>(grid_for(n, kThreads), 1024), kThreads, 0, current_stream()>>>(x, n, out);
  check_launch("sum_squares");
}

template <typename P>
void adamw(float* w, const float* grad, float* m, float* v, P* param, const AdamWScalars& s, int64_t n) {
  if (n == 0) return;
  adamw_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(w, grad, m, v, on_device(param), s, n);
  check_launch("adamw");
}

template <typename T>
void add_scaled_columns(T* out, int64_t out_cols, int64_t out_column, const T* x, int64_t x_cols, int64_t x_column,
                        int64_t rows, int64_t width, float scale) {
  const int64_t n = rows * width;
  if (n == 0) return;
  add_scaled_columns_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(
      on_device(out), out_cols, out_column, on_device(x), x_cols, x_column, width, scale, n);
  check_launch("add_scaled_columns_");
}

template <typename T>
void dropout(const T* x, float p, uint64_t seed, int64_t n, T* out) {
  if (n == 0) return;
  dropout_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(on_device(x), p, seed, n,
                                                                          on_device(out));
  check_launch("dropout");
}

#define TFM_TRAINING_LAUNCHERS(T)                                                                               \
  template void column_sums<T>(const T*, int64_t, int64_t, float*);                                             \
  template void rms_norm_backward<T>(const T*, const T*, const T*, int64_t, int64_t, float, T*, float*);        \
  template void silu_mul_backward<T>(const T*, const T*, int64_t, int64_t, T*);                                 \
  template void embedding_backward<T>(const int32_t*, const T*, int64_t, int64_t, float*);                      \
  template void cross_entropy<T>(const T*, const int32_t*, int64_t, int64_t, float, float*, T*);                \
  template void adamw<T>(float*, const float*, float*, float*, T*, const AdamWScalars&, int64_t);               \
  template void add_scaled_columns<T>(T*, int64_t, int64_t, const T*, int64_t, int64_t, int64_t, int64_t, float); \
  template void dropout<T>(const T*, float, uint64_t, int64_t, T*);
TFM_TRAINING_LAUNCHERS(float)
TFM_TRAINING_LAUNCHERS(bfloat16)
TFM_TRAINING_LAUNCHERS(float16)

}  // namespace tfm::cuda::launch

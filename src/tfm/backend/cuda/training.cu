// The training kernels (op_set.h's training ops but linear's backward, which is cuBLASLt's): each backward
// beside what it differentiates, the loss and AdamW, rounding as the CPU's training.cpp does. Parameter
// gradients add into their float32 accumulators with atomics, so their sums are not bit-reproducible from run
// to run (as torch's CUDA backward is not).
#include "tfm/backend/cuda/device_common.cuh"
#include "tfm/backend/cuda/launchers.h"
#include "tfm/backend/sampling_math.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;

template <typename T>
__global__ void column_sums_kernel(const T* x, int64_t rows, int64_t cols, float* sums) {
  for (int64_t c = first_index(); c < cols; c += grid_stride()) {
    float s = 0.f;
    for (int64_t r = 0; r < rows; ++r) s += to_float(x[r * cols + c]);
    sums[c] += s;
  }
}

// One block per row; dx may be dout (each element is read, then written, by one thread).
template <typename T>
__global__ void rms_norm_backward_kernel(const T* x, const T* weight, const T* dout, int64_t dim, float eps, T* dx,
                                         float* dweight) {
  __shared__ float shared[32];
  const int64_t offset = blockIdx.x * dim;
  float sum = 0.f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += to_float(x[offset + i]) * to_float(x[offset + i]);
  const float inv = 1.f / sqrtf(block_sum(sum, shared) / static_cast<float>(dim) + eps);
  float dot = 0.f;  // sum of dn * n
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float n = to_float(x[offset + i]) * inv, g = to_float(dout[offset + i]);
    dot += g * to_float(weight[i]) * n;
    if (dweight) atomicAdd(dweight + i, g * round_to<T>(n));
  }
  const float mean = block_sum(dot, shared) / static_cast<float>(dim);
  if (!dx) return;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float n = to_float(x[offset + i]) * inv;
    dx[offset + i] = from_float<T>((to_float(dout[offset + i]) * to_float(weight[i]) - n * mean) * inv);
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

// Attention's backward in two kernels, so that every output element has one writer (no atomics): one block per
// (query row, head) recomputes the row's softmax (a warp per key, lanes over the head dimension), writes dq and
// keeps the row's log-sum-exp and dout . out; then one block per (key row, kv head) sums dk and dv over the
// query rows and heads that saw the key. Lanes keep their part of a head's vector in registers.
constexpr int kAttentionWarps = 4;
constexpr int kMaxHeadDim = 256;
constexpr int kLaneFloats = kMaxHeadDim / kWarp;

// The sequence holding `row` and where it starts.
__device__ void sequence_of(const int32_t* query_start, int64_t row, int64_t& start, int64_t& end) {
  int64_t s = 0;
  while (query_start[s + 1] <= row) ++s;
  start = query_start[s];
  end = query_start[s + 1];
}

template <typename T>
__device__ float warp_dot(const float* lane_part, const T* v, int64_t D) {
  float dot = 0.f;
  for (int t = 0; t < kLaneFloats; ++t) {
    const int64_t c = (threadIdx.x % kWarp) + t * kWarp;
    if (c < D) dot += lane_part[t] * to_float(v[c]);
  }
  return warp_reduce<Sum>(dot);
}

// The warps' register parts summed into `shared_vec` (D floats) and written to `out` in T.
template <typename T>
__device__ void write_summed(const float* lane_part, float* shared_vec, int64_t D, T* out) {
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) shared_vec[c] = 0.f;
  __syncthreads();
  for (int t = 0; t < kLaneFloats; ++t) {
    const int64_t c = (threadIdx.x % kWarp) + t * kWarp;
    if (c < D) atomicAdd(shared_vec + c, lane_part[t]);
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) out[c] = from_float<T>(shared_vec[c]);
}

template <typename T>
__device__ void load_lane_part(const T* v, int64_t D, float* part) {
  for (int t = 0; t < kLaneFloats; ++t) {
    const int64_t c = (threadIdx.x % kWarp) + t * kWarp;
    part[t] = c < D ? to_float(v[c]) : 0.f;
  }
}

template <typename T>
__global__ void attention_dq_kernel(AttentionBackwardArgs a, const T* q, const T* k, const T* v, const T* out,
                                    const T* dout, T* dq, float* lse, float* delta) {
  __shared__ float shared[32];
  __shared__ float shared_vec[kMaxHeadDim];
  const int64_t row = blockIdx.x, h = blockIdx.y, D = a.head_dim, kvh = h / (a.heads / a.kv_heads);
  int64_t start, end;
  sequence_of(a.query_start, row, start, end);
  const int64_t i = row - start, first = a.window > 0 && i - a.window + 1 > 0 ? i - a.window + 1 : 0;
  float q_part[kLaneFloats], g_part[kLaneFloats], dq_part[kLaneFloats] = {};
  load_lane_part(q + (row * a.heads + h) * D, D, q_part);
  load_lane_part(dout + (row * a.heads + h) * D, D, g_part);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  auto key = [&](const T* base, int64_t j) { return base + ((start + j) * a.kv_heads + kvh) * D; };
  float max = -INFINITY;
  for (int64_t j = first + warp; j <= i; j += kAttentionWarps) max = fmaxf(max, warp_dot(q_part, key(k, j), D) * a.scale);
  max = block_max(max, shared);
  float sum = 0.f;
  for (int64_t j = first + warp; j <= i; j += kAttentionWarps) sum += expf(warp_dot(q_part, key(k, j), D) * a.scale - max);
  sum = block_sum(lane == 0 ? sum : 0.f, shared);
  const float row_lse = max + logf(sum);
  const float row_delta = warp_dot(g_part, out + (row * a.heads + h) * D, D);
  for (int64_t j = first + warp; j <= i; j += kAttentionWarps) {
    const float p = expf(warp_dot(q_part, key(k, j), D) * a.scale - row_lse);
    const float ds = p * (warp_dot(g_part, key(v, j), D) - row_delta) * a.scale;
    const T* kj = key(k, j);
    for (int t = 0; t < kLaneFloats; ++t) {
      const int64_t c = lane + t * kWarp;
      if (c < D) dq_part[t] += ds * to_float(kj[c]);
    }
  }
  if (threadIdx.x == 0) {
    lse[row * a.heads + h] = row_lse;
    delta[row * a.heads + h] = row_delta;
  }
  write_summed(dq_part, shared_vec, D, dq + (row * a.heads + h) * D);
}

template <typename T>
__global__ void attention_dkdv_kernel(AttentionBackwardArgs a, const T* q, const T* k, const T* v, const T* dout,
                                      const float* lse, const float* delta, T* dk, T* dv) {
  __shared__ float shared_vec[kMaxHeadDim];
  const int64_t key_row = blockIdx.x, kvh = blockIdx.y, D = a.head_dim, group = a.heads / a.kv_heads;
  int64_t start, end;
  sequence_of(a.query_start, key_row, start, end);
  const int64_t last = a.window > 0 && key_row + a.window - 1 < end - 1 ? key_row + a.window - 1 : end - 1;
  float k_part[kLaneFloats], v_part[kLaneFloats], dk_part[kLaneFloats] = {}, dv_part[kLaneFloats] = {};
  load_lane_part(k + (key_row * a.kv_heads + kvh) * D, D, k_part);
  load_lane_part(v + (key_row * a.kv_heads + kvh) * D, D, v_part);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  // A warp per (query row, head of the group) pair.
  const int64_t pairs = (last - key_row + 1) * group;
  for (int64_t pair = warp; pair < pairs; pair += kAttentionWarps) {
    const int64_t row = key_row + pair / group, h = kvh * group + pair % group;
    const T* qi = q + (row * a.heads + h) * D;
    const T* gi = dout + (row * a.heads + h) * D;
    const float p = expf(warp_dot(k_part, qi, D) * a.scale - lse[row * a.heads + h]);
    const float ds = p * (warp_dot(v_part, gi, D) - delta[row * a.heads + h]) * a.scale;
    for (int t = 0; t < kLaneFloats; ++t) {
      const int64_t c = lane + t * kWarp;
      if (c < D) {
        dk_part[t] += ds * to_float(qi[c]);
        dv_part[t] += p * to_float(gi[c]);
      }
    }
  }
  write_summed(dk_part, shared_vec, D, dk + (key_row * a.kv_heads + kvh) * D);
  __syncthreads();
  write_summed(dv_part, shared_vec, D, dv + (key_row * a.kv_heads + kvh) * D);
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
  rms_norm_backward_kernel<<<static_cast<unsigned>(rows), threads_for_row(dim), 0, current_stream()>>>(
      on_device(x), on_device(weight), on_device(dout), dim, eps, on_device(dx), dweight);
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

template <typename T>
void attention_backward(const AttentionBackwardArgs& a, const T* q, const T* k, const T* v, const T* out,
                        const T* dout, float* lse, float* delta, T* dq, T* dk, T* dv) {
  check(a.head_dim <= kMaxHeadDim, "attention_backward on cuda takes head_dim up to ", kMaxHeadDim, ", not ",
        a.head_dim);
  if (a.rows == 0) return;
  const unsigned threads = kAttentionWarps * kWarp;
  attention_dq_kernel<<<dim3(static_cast<unsigned>(a.rows), static_cast<unsigned>(a.heads)), threads, 0,
                        current_stream()>>>(a, on_device(q), on_device(k), on_device(v), on_device(out),
                                            on_device(dout), on_device(dq), lse, delta);
  check_launch("attention_backward (dq)");
  attention_dkdv_kernel<<<dim3(static_cast<unsigned>(a.rows), static_cast<unsigned>(a.kv_heads)), threads, 0,
                          current_stream()>>>(a, on_device(q), on_device(k), on_device(v), on_device(dout), lse,
                                              delta, on_device(dk), on_device(dv));
  check_launch("attention_backward (dk, dv)");
}

#define TFM_TRAINING_LAUNCHERS(T)                                                                               \
  template void column_sums<T>(const T*, int64_t, int64_t, float*);                                             \
  template void rms_norm_backward<T>(const T*, const T*, const T*, int64_t, int64_t, float, T*, float*);        \
  template void silu_mul_backward<T>(const T*, const T*, int64_t, int64_t, T*);                                 \
  template void embedding_backward<T>(const int32_t*, const T*, int64_t, int64_t, float*);                      \
  template void cross_entropy<T>(const T*, const int32_t*, int64_t, int64_t, float, float*, T*);                \
  template void adamw<T>(float*, const float*, float*, float*, T*, const AdamWScalars&, int64_t);               \
  template void add_scaled_columns<T>(T*, int64_t, int64_t, const T*, int64_t, int64_t, int64_t, int64_t, float); \
  template void dropout<T>(const T*, float, uint64_t, int64_t, T*);                                             \
  template void attention_backward<T>(const AttentionBackwardArgs&, const T*, const T*, const T*, const T*,     \
                                      const T*, float*, float*, T*, T*, T*);
TFM_TRAINING_LAUNCHERS(float)
TFM_TRAINING_LAUNCHERS(bfloat16)
TFM_TRAINING_LAUNCHERS(float16)

}  // namespace tfm::cuda::launch

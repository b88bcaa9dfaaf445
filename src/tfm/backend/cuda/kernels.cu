// The CUDA kernels of the op set. Simple and correct first: one thread block per row (norms, attention
// heads), grid-stride loops for elementwise work. Matmul goes through cuBLAS in cuda_op_kernels.cpp.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdio>

#include "tfm/backend/cuda/kernels.h"

namespace tfm::cuda {
namespace {

constexpr int kThreads = 256;

Status launched(const char* name) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return "";
  static thread_local char message[256];
  std::snprintf(message, sizeof message, "CUDA kernel %s: %s", name, cudaGetErrorString(e));
  return message;
}

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8);
}

__device__ float block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < blockDim.x / 32 ? shared[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  __syncthreads();
  return v;
}

__device__ float block_max(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < blockDim.x / 32 ? shared[lane] : -FLT_MAX;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  __syncthreads();
  return v;
}

__global__ void embedding_kernel(const float* table, const int32_t* ids, int64_t H, float* out) {
  const int64_t t = blockIdx.x;
  const float* row = table + static_cast<int64_t>(ids[t]) * H;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) out[t * H + i] = row[i];
}

__global__ void add_bias_rows_kernel(float* y, const float* bias, int64_t M, int64_t N) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < M * N;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] += bias[i % N];
  }
}

__global__ void rms_norm_kernel(const float* x, const float* weight, int64_t dim, float eps, float* out) {
  __shared__ float shared[32];
  const float* xr = x + blockIdx.x * dim;
  float* o = out + blockIdx.x * dim;
  float sum = 0.f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += xr[i] * xr[i];
  sum = block_sum(sum, shared);
  const float inv = 1.f / sqrtf(sum / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) o[i] = weight[i] * (xr[i] * inv);
}

__global__ void rope_kernel(float* x, const float* cos, const float* sin, int64_t heads, int64_t head_dim,
                            int64_t rot_dim) {
  const int64_t t = blockIdx.x / heads;
  float* v = x + blockIdx.x * head_dim;
  const float* c = cos + t * rot_dim;
  const float* s = sin + t * rot_dim;
  const int64_t half = rot_dim / 2;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const float a = v[i], b = v[i + half];
    v[i] = a * c[i] - b * s[i];
    v[i + half] = b * c[i + half] + a * s[i + half];
  }
}

__global__ void silu_mul_kernel(const float* gate_up, int64_t T, int64_t I, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < T * I;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / I, j = i % I;
    const float g = gate_up[t * 2 * I + j], u = gate_up[t * 2 * I + I + j];
    out[i] = g / (1.f + expf(-g)) * u;
  }
}

__global__ void add_kernel(float* x, const float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] += y[i];
  }
}

struct SplitOutputs {
  float* out[4];
  int64_t width[4];
  int n;
};

__global__ void split_columns_kernel(const float* x, int64_t T, int64_t total, SplitOutputs outs) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < T * total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / total;
    int64_t c = i % total;
    int k = 0;
    while (c >= outs.width[k]) c -= outs.width[k++];
    outs.out[k][t * outs.width[k] + c] = x[i];
  }
}

__global__ void gather_rows_kernel(const float* x, int64_t H, const int32_t* rows, float* out) {
  const float* src = x + static_cast<int64_t>(rows[blockIdx.x]) * H;
  for (int64_t i = threadIdx.x; i < H; i += blockDim.x) out[blockIdx.x * H + i] = src[i];
}

__global__ void kv_cache_write_kernel(const float* k, const float* v, const int32_t* slots, int64_t kv_dim,
                                      float* cache_k, float* cache_v) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t];
  for (int64_t i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    cache_k[slot * kv_dim + i] = k[t * kv_dim + i];
    cache_v[slot * kv_dim + i] = v[t * kv_dim + i];
  }
}

constexpr int kAttentionThreads = 128;
constexpr int kMaxHeadDimPerThread = 4;  // head_dim up to 512

// One block per (row, head). Keys are visited in tiles of one per thread: each thread scores one key, the
// block finds the tile's maximum, and every thread accumulates its share of the head dimensions. The one-pass
// form rescales what it summed whenever the running maximum grows; the eager form first finds the row's
// maximum, so that every probability is exp(score - max) / sum as a materialized softmax computes it.
__global__ void paged_attention_kernel(PagedAttentionArgs a, bool two_pass) {
  __shared__ float shared[32];
  __shared__ float p[kAttentionThreads];
  extern __shared__ float q[];
  const int64_t row = blockIdx.x / a.heads, h = blockIdx.x % a.heads;
  const int64_t D = a.head_dim;
  int64_t s = 0;
  while (a.query_start[s + 1] <= row) ++s;
  const int64_t pos = a.positions[row];
  const int64_t last = min(pos, static_cast<int64_t>(a.context_lens[s]) - 1);
  const int64_t first = a.window > 0 ? max(static_cast<int64_t>(0), pos - a.window + 1) : 0;
  const int32_t* blocks = a.block_tables + s * a.max_blocks;
  const int64_t kvh = h / (a.heads / a.kv_heads);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) q[i] = a.q[(row * a.heads + h) * D + i];
  __syncthreads();
  auto key = [&](const float* cache, int64_t j) {
    const int64_t block = blocks[j / a.block_size];
    return cache + ((block * a.block_size + j % a.block_size) * a.kv_heads + kvh) * D;
  };
  auto score = [&](int64_t j) {
    const float* k = key(a.cache_k, j);
    float d = 0.f;
    for (int64_t i = 0; i < D; ++i) d += q[i] * k[i];
    return d * a.scale;
  };

  float running_max = -FLT_MAX;
  if (two_pass) {
    for (int64_t j0 = first; j0 <= last; j0 += blockDim.x) {
      const int64_t j = j0 + threadIdx.x;
      running_max = fmaxf(running_max, block_max(j <= last ? score(j) : -FLT_MAX, shared));
    }
  }
  float acc[kMaxHeadDimPerThread] = {0.f, 0.f, 0.f, 0.f};
  float denom = 0.f;
  for (int64_t j0 = first; j0 <= last; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    const float sc = j <= last ? score(j) : -FLT_MAX;
    if (!two_pass) {
      const float new_max = fmaxf(running_max, block_max(sc, shared));
      const float rescale = expf(running_max - new_max);
      denom *= rescale;
      for (int k = 0; k < kMaxHeadDimPerThread; ++k) acc[k] *= rescale;
      running_max = new_max;
    }
    const float pj = j <= last ? expf(sc - running_max) : 0.f;
    p[threadIdx.x] = pj;
    denom += block_sum(pj, shared);
    const int64_t n = min(static_cast<int64_t>(blockDim.x), last - j0 + 1);
    for (int64_t t = 0; t < n; ++t) {
      const float* v = key(a.cache_v, j0 + t);
      for (int k = 0; k < kMaxHeadDimPerThread; ++k) {
        const int64_t i = threadIdx.x + k * blockDim.x;
        if (i < D) acc[k] += p[t] * v[i];
      }
    }
    __syncthreads();
  }
  float* o = a.out + (row * a.heads + h) * D;
  const float inv = last >= first ? 1.f / denom : 0.f;
  for (int k = 0; k < kMaxHeadDimPerThread; ++k) {
    const int64_t i = threadIdx.x + k * blockDim.x;
    if (i < D) o[i] = acc[k] * inv;
  }
}

}  // namespace

Status embedding(const float* table, const int32_t* ids, int64_t T, int64_t H, float* out) {
  if (T == 0) return "";
  embedding_kernel<<<static_cast<unsigned>(T), kThreads>>>(table, ids, H, out);
  return launched("embedding");
}

Status add_bias_rows(float* y, const float* bias, int64_t M, int64_t N) {
  add_bias_rows_kernel<<<blocks_for(M * N), kThreads>>>(y, bias, M, N);
  return launched("add_bias_rows");
}

Status rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out) {
  if (rows == 0) return "";
  rms_norm_kernel<<<static_cast<unsigned>(rows), kThreads>>>(x, weight, dim, eps, out);
  return launched("rms_norm");
}

Status rope(float* x, const float* cos, const float* sin, int64_t T, int64_t heads, int64_t head_dim,
            int64_t rot_dim) {
  if (T * heads == 0) return "";
  rope_kernel<<<static_cast<unsigned>(T * heads), 64>>>(x, cos, sin, heads, head_dim, rot_dim);
  return launched("rope");
}

Status silu_mul(const float* gate_up, int64_t T, int64_t I, float* out) {
  silu_mul_kernel<<<blocks_for(T * I), kThreads>>>(gate_up, T, I, out);
  return launched("silu_mul");
}

Status add_inplace(float* x, const float* y, int64_t n) {
  add_kernel<<<blocks_for(n), kThreads>>>(x, y, n);
  return launched("add");
}

Status split_columns(const float* x, int64_t T, float* const* outs, const int64_t* widths, int64_t n) {
  if (n > 4) return "CUDA kernel split_columns: more than 4 outputs";
  SplitOutputs o{};
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    o.out[i] = outs[i];
    o.width[i] = widths[i];
    total += widths[i];
  }
  o.n = static_cast<int>(n);
  split_columns_kernel<<<blocks_for(T * total), kThreads>>>(x, T, total, o);
  return launched("split_columns");
}

Status gather_rows(const float* x, int64_t H, const int32_t* rows, int64_t R, float* out) {
  if (R == 0) return "";
  gather_rows_kernel<<<static_cast<unsigned>(R), kThreads>>>(x, H, rows, out);
  return launched("gather_rows");
}

Status kv_cache_write(const float* k, const float* v, const int32_t* slots, int64_t T, int64_t kv_dim,
                      float* cache_k, float* cache_v) {
  if (T == 0) return "";
  kv_cache_write_kernel<<<static_cast<unsigned>(T), kThreads>>>(k, v, slots, kv_dim, cache_k, cache_v);
  return launched("kv_cache_write");
}

Status paged_attention(const PagedAttentionArgs& a, bool materialize_scores) {
  if (a.head_dim > kAttentionThreads * kMaxHeadDimPerThread)
    return "CUDA kernel paged_attention: head_dim over 512";
  if (a.num_rows == 0) return "";
  const size_t shared = static_cast<size_t>(a.head_dim) * sizeof(float);
  paged_attention_kernel<<<static_cast<unsigned>(a.num_rows * a.heads), kAttentionThreads, shared>>>(
      a, materialize_scores);
  return launched("paged_attention");
}

}  // namespace tfm::cuda

// The training kernels (op_set.h's training ops but linear's backward, which is cuBLASLt's, and attention's, in
// attention_backward.cu): each backward beside what it differentiates, the loss and AdamW, rounding as the CPU's
// training.cpp does. Parameter gradients add into their float32 accumulators with atomics, so their sums are not
// bit-reproducible from run to run (as torch's CUDA backward is not).
#include "tfm/backend/cuda/launchers.h"
#include "tfm/backend/cuda/rows.cuh"
#include "tfm/backend/sampling_math.h"

namespace tfm::cuda::launch {
namespace {

constexpr int kThreads = 256;
constexpr int kLossThreads = 1024;  // cross_entropy's block, which takes a row

template <typename T>
__global__ void column_sums_kernel(const T* x, int64_t rows, int64_t cols, float* sums) {
  wait_for_previous_kernel();
  for (int64_t c = first_index(); c < cols; c += grid_stride()) {
    float s = 0.f;
    for (int64_t r = 0; r < rows; ++r) s += to_float(x[r * cols + c]);
    sums[c] += s;
  }
}

// rows.cuh's groups of lanes over a grid-stride loop of rows, each row's x and dout read once into registers
// (the weight, the same for every row, comes from the cache each time: held, it and the dweight sums
// spilled), and with `accumulate` dx fetched into L1 meanwhile, so that the last pass does not wait on memory
// again; dx may be dout (each element is read, then written, by one thread), or, with `accumulate`, dx +=
// the gradient (the residual stream's add, rounded as add_ rounds it). A lane holds the same columns in every
// row, so it sums their dweight terms in registers; the block's groups add theirs in shared memory, and the
// block adds the total to dweight once: one atomic per element a block, not a row. Rows too long to hold
// (kVecs 0) are read again in each pass and add their dweight terms at once.
template <typename T, int kVecs, bool Wide>
__global__ void __launch_bounds__(row_block_limit(kVecs), kVecs == kMaxRowVecs ? 2 : 1)
    rms_norm_backward_kernel(const T* x, const T* weight, const T* dout, int64_t rows, int64_t dim, float eps,
                             int lanes, bool accumulate, T* dx, float* dweight) {
  wait_for_previous_kernel();
  // With Wide (aligned rows of whole pieces) a piece is all inside a row or all past it: one 16-byte access
  // or none, and no element-by-element path to hold registers for.
  const auto load = [](const T* p, int64_t i, int64_t n) {
    if constexpr (Wide) {
      Vec<T> v{};
      if (i < n) v = load_vec(p, i, i + Vec<T>::kSize, true);
      return v;
    } else {
      return load_vec(p, i, n, false);
    }
  };
  const auto store = [](T* p, int64_t i, int64_t n, const Vec<T>& v) {
    if constexpr (Wide) {
      if (i < n) store_vec(p, i, i + Vec<T>::kSize, true, v);
    } else {
      store_vec(p, i, n, false, v);
    }
  };
  __shared__ float shared[32];
  extern __shared__ float dweight_part[];  // the columns of a group's lanes, when several groups share them
  constexpr int E = Vec<T>::kSize, kHeld = kVecs > 0 ? kVecs : 1;
  const RowGroup g(lanes);
  float part[kHeld][E] = {};
  for (int64_t first = g.first_row(); first < rows; first += g.row_stride()) {
    const int64_t row = first + g.group, offset = row * dim, n = row < rows ? dim : 0;
    Vec<T> xv[kHeld], gv[kHeld];
    float sum = 0.f;
#pragma unroll
    for (int k = 0; kVecs > 0 ? k < kVecs : g.column<T>(k) < dim; ++k) {
      const Vec<T> v = load(x + offset, g.column<T>(k), n);
#pragma unroll
      for (int e = 0; e < E; ++e) sum += to_float(v.at[e]) * to_float(v.at[e]);
      if constexpr (kVecs > 0) {
        xv[k] = v;
        gv[k] = load(dout + offset, g.column<T>(k), n);
        if (accumulate && g.column<T>(k) < n) prefetch_l1(dx + offset + g.column<T>(k));
      }
    }
    // Piece k of x and dout: held, or read again.
    auto piece = [&](int k, Vec<T>& xk, Vec<T>& gk) {
      if constexpr (kVecs > 0) {
        xk = xv[k], gk = gv[k];
      } else {
        xk = load(x + offset, g.column<T>(k), n);
        gk = load(dout + offset, g.column<T>(k), n);
      }
    };
    const float inv = 1.f / sqrtf(g.sum(sum, shared) / static_cast<float>(dim) + eps);
    float dot = 0.f;  // sum of dn * n
#pragma unroll
    for (int k = 0; kVecs > 0 ? k < kVecs : g.column<T>(k) < dim; ++k) {
      Vec<T> xk, gk;
      piece(k, xk, gk);
      const Vec<T> wk = load(weight, g.column<T>(k), n);
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float nk = to_float(xk.at[e]) * inv, d = to_float(gk.at[e]);
        dot += d * to_float(wk.at[e]) * nk;
        if (n == 0 || !dweight) continue;  // an inactive row's n is NaN when eps is 0
        if constexpr (kVecs > 0)
          part[k][e] += d * round_to<T>(nk);
        else if (g.column<T>(k) + e < dim)
          atomicAdd(dweight + g.column<T>(k) + e, d * round_to<T>(nk));
      }
    }
    const float mean = g.sum(dot, shared) / static_cast<float>(dim);
    if (n == 0 || !dx) continue;
#pragma unroll
    for (int k = 0; kVecs > 0 ? k < kVecs : g.column<T>(k) < dim; ++k) {
      Vec<T> xk, gk;
      piece(k, xk, gk);
      const Vec<T> wk = load(weight, g.column<T>(k), n);
      const Vec<T> before = accumulate ? load(dx + offset, g.column<T>(k), n) : Vec<T>{};
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float nk = to_float(xk.at[e]) * inv;
        const float grad = (to_float(gk.at[e]) * to_float(wk.at[e]) - nk * mean) * inv;
        xk.at[e] = from_float<T>(accumulate ? to_float(before.at[e]) + round_to<T>(grad) : grad);
      }
      store(dx + offset, g.column<T>(k), n, xk);
    }
  }
  if (kVecs == 0 || !dweight) return;
  const int held = lanes * kHeld * E;  // columns a group holds: the row's, and up to a piece a lane more
  if (g.groups > 1) {
    for (int i = threadIdx.x; i < held; i += blockDim.x) dweight_part[i] = 0.f;
    __syncthreads();
  }
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int64_t c = g.column<T>(k) + e;
      if (g.groups > 1)
        atomicAdd(dweight_part + c, part[k][e]);
      else if (c < dim)
        atomicAdd(dweight + c, part[k][e]);
    }
  }
  if (g.groups == 1) return;
  __syncthreads();
  for (int i = threadIdx.x; i < dim; i += blockDim.x) atomicAdd(dweight + i, dweight_part[i]);
}

// Item i is a piece of row i / pieces of dout, as in silu_mul.
template <typename T>
__global__ void silu_mul_backward_kernel(const T* gate_up, const T* dout, int64_t inter, int64_t pieces, int64_t n,
                                         bool wide, T* dgate_up) {
  wait_for_previous_kernel();
  constexpr int E = Vec<T>::kSize;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const auto [row, piece] = divide(i, pieces);
    const int64_t c = piece * E;
    const T* gate = gate_up + row * 2 * inter;
    T* dgate = dgate_up + row * 2 * inter;
    const Vec<T> g = load_vec(gate, c, inter, wide), u = load_vec(gate + inter, c, inter, wide);
    const Vec<T> d = load_vec(dout + row * inter, c, inter, wide);
    Vec<T> dg, du;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float gv = to_float(g.at[e]), up = to_float(u.at[e]), dv = to_float(d.at[e]);
      const float s = 1.f / (1.f + expf(-gv));
      dg.at[e] = from_float<T>(dv * up * s * (1.f + gv * (1.f - s)));
      du.at[e] = from_float<T>(dv * round_to<T>(gv * s));
    }
    store_vec(dgate, c, inter, wide, dg);
    store_vec(dgate + inter, c, inter, wide, du);
  }
}

template <typename T>
__global__ void embedding_backward_kernel(const int32_t* ids, const T* dout, int64_t hidden, int64_t n,
                                          float* dtable) {
  wait_for_previous_kernel();
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const auto [row, column] = divide(i, hidden);
    atomicAdd(dtable + int64_t{ids[row]} * hidden + column, to_float(dout[i]));
  }
}

// A running log-sum-exp: sum = the sum of exp(v - max) over the values seen. A max of -inf (no value seen, or
// only -inf) has a sum of 0, and adds nothing when merged.
struct LogSumExp {
  float max = -INFINITY, sum = 0.f;

  // The piece of a row at [i, i + kSize), of which those at or past n are not values.
  template <typename T>
  __device__ void add(const Vec<T>& v, int64_t i, int64_t n) {
    float f[Vec<T>::kSize], m = max;
#pragma unroll
    for (int e = 0; e < Vec<T>::kSize; ++e) {
      f[e] = i + e < n ? to_float(v.at[e]) : -INFINITY;
      m = fmaxf(m, f[e]);
    }
    if (m == -INFINITY) return;
    sum *= expf(max - m);
    max = m;
#pragma unroll
    for (int e = 0; e < Vec<T>::kSize; ++e) sum += expf(f[e] - m);
  }
  // This thread's sum rescaled to the block's max `m`.
  __device__ float sum_at(float m) const { return max == -INFINITY ? 0.f : sum * expf(max - m); }
};

// One block per row (one a multiprocessor, by its registers), which it reads twice: once for its log-sum-exp
// (online, in one pass), once for the gradient. The first pass keeps the row's first `stashed` elements in
// shared memory (a multiple of the pieces, up to most of what a block may take), so that the second reads
// only the rest from global memory, the part it read last: a 151,936-word bf16 row is 297 KB, and a device's
// rows in flight (~39 MB on 132 multiprocessors) crowd L2 between the passes. Training on the Qwen3-0.6B
// shape went 0 to +0.3% (LoRA) and +0.1 to +0.5% (full) with it, in two calls on an H100. dlogits may be
// logits: every read of the first pass, the label's logit's too, comes before the barriers of the
// reductions, and each element of the second is read by the thread that writes it.
template <typename T>
__global__ void __launch_bounds__(kLossThreads)
    cross_entropy_kernel(const T* logits, const int32_t* labels, int64_t vocab, float grad_scale, bool wide,
                         int64_t stashed, float* loss, T* dlogits) {
  wait_for_previous_kernel();
  constexpr int E = Vec<T>::kSize, kUnroll = 4;  // pieces in flight a thread
  extern __shared__ __align__(16) unsigned char smem[];
  Vec<T>* stash = reinterpret_cast<Vec<T>*>(smem);  // elements [0, stashed) of the row, a piece an entry
  __shared__ float shared[32];
  __shared__ float label_logit;
  const T* x = logits + blockIdx.x * vocab;
  T* d = dlogits + blockIdx.x * vocab;
  const int32_t label = labels[blockIdx.x];
  const int64_t step = static_cast<int64_t>(blockDim.x) * E;
  if (label == kIgnoreLabel) {
    Vec<T> zero;
#pragma unroll
    for (int e = 0; e < E; ++e) zero.at[e] = from_float<T>(0.f);
    for (int64_t i = threadIdx.x * E; i < vocab; i += step) store_vec(d, i, vocab, wide, zero);
    return;
  }
  if (threadIdx.x == 0) label_logit = to_float(x[label]);
  LogSumExp lse;
  for (int64_t i = threadIdx.x * E; i < vocab; i += kUnroll * step) {
    Vec<T> v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = load_vec(x, i + u * step, vocab, wide);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      lse.add(v[u], i + u * step, vocab);
      if (i + u * step < stashed) stash[(i + u * step) / E] = v[u];
    }
  }
  const float max = block_max(lse.max, shared);
  const float log_sum = logf(block_sum(lse.sum_at(max), shared));  // its barriers also publish label_logit
  if (threadIdx.x == 0) atomicAdd(loss, log_sum - (label_logit - max));
  for (int64_t i = threadIdx.x * E; i < vocab; i += step) {
    Vec<T> v = i < stashed ? stash[i / E] : load_vec(x, i, vocab, wide);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const float p = expf(to_float(v.at[e]) - max - log_sum);
      v.at[e] = from_float<T>((p - (i + e == label ? 1.f : 0.f)) * grad_scale);
    }
    store_vec(d, i, vocab, wide, v);
  }
}

__global__ void sum_squares_kernel(const float* x, int64_t n, float* out) {
  wait_for_previous_kernel();
  __shared__ float shared[32];
  float s = 0.f;
  for (int64_t i = first_index(); i < n; i += grid_stride()) s += x[i] * x[i];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) atomicAdd(out, s);
}

// Each array is read and written once an element, through registers: updated in place, arrays the compiler
// must assume may alias were read again after every store. The decayed weight is rounded to float before the
// update, as the CPU has it (it stores it first); __fmul_rn keeps the compiler from contracting it into an
// fma.
template <typename P>
__global__ void adamw_kernel(float* w, const float* grad, float* m, float* v, P* param, AdamWScalars s, int64_t n) {
  wait_for_previous_kernel();
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float g = grad[i] * s.grad_scale;
    const float mi = m[i] + (g - m[i]) * s.one_minus_beta1;
    const float vi = v[i] * s.beta2 + s.one_minus_beta2 * g * g;
    const float wi = __fmul_rn(w[i], s.decay) - s.step_size * mi / (sqrtf(vi) / s.bias2_sqrt + s.eps);
    m[i] = mi;
    v[i] = vi;
    w[i] = wi;
    if (param) param[i] = from_float<P>(wi);
  }
}

// The blocks one launch takes, and where each starts in the launch's items (one an element).
template <typename T>
struct ScaledColumnsBlocks {
  ScaledColumnsBlock<T> block[kMaxScaledColumnsBlocks];
  int64_t first[kMaxScaledColumnsBlocks + 1];
  int count;
};

template <typename T>
__global__ void add_scaled_columns_kernel(ScaledColumnsBlocks<T> blocks, bool accumulate) {
  wait_for_previous_kernel();
  for (int64_t i = first_index(); i < blocks.first[blocks.count]; i += grid_stride()) {
    int k = 0;
    while (i >= blocks.first[k + 1]) ++k;
    const ScaledColumnsBlock<T>& b = blocks.block[k];
    const auto [r, c] = divide(i - blocks.first[k], b.width);
    T* o = b.out + r * b.out_cols + b.out_column + c;
    const float scaled = round_to<T>(b.scale * to_float(b.x[r * b.x_cols + b.x_column + c]));
    *o = from_float<T>(accumulate ? to_float(*o) + scaled : scaled);
  }
}

template <typename T>
__global__ void dropout_kernel(const T* x, float p, uint64_t seed, int64_t n, T* out) {
  wait_for_previous_kernel();
  const float keep_scale = 1.f / (1.f - p);
  const uint64_t key = splitmix64(seed);
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    out[i] = dropout_uniform(key, i) >= p ? from_float<T>(to_float(x[i]) * keep_scale) : from_float<T>(0.f);
  }
}

}  // namespace

template <typename T>
void column_sums(const T* x, int64_t rows, int64_t cols, float* sums) {
  if (cols == 0) return;
  launch_chained(column_sums_kernel<device_t<T>>, grid_for(cols, kThreads), kThreads, 0, on_device(x), rows,
                 cols, sums);
  check_launch("linear_backward's bias");
}

template <typename T>
void rms_norm_backward(const T* x, const T* weight, const T* dout, int64_t rows, int64_t dim, float eps,
                       bool accumulate, T* dx, float* dweight) {
  if (rows == 0 || dim == 0) return;
  constexpr int E = Vec<device_t<T>>::kSize;
  const bool wide = wide_access<T>(dim, x, weight, dout) && (!dx || wide_access<T>(dim, dx));
  // Up to four pieces a lane, so that a hidden row of 1,024 bf16 is one warp's (reduced by shuffles) and a
  // block's groups sum their dweight parts before one atomic a column per block. With two, such a row was a
  // block of 64 threads and each of some 4,000 blocks added its sums to the same 1,024 floats atomically
  // (0.137 ms at the Qwen3-0.6B training shape).
  constexpr int kMaxVecs = 4;
  const RowLayout layout = row_layout(rows, (dim + E - 1) / E, kMaxVecs);
  with_row_vecs<kMaxVecs>(layout, [&](auto vecs) {
    const auto launch = [&](auto wide_rows) {
      constexpr int kVecs = decltype(vecs)::value;
      const auto kernel = rms_norm_backward_kernel<device_t<T>, kVecs, decltype(wide_rows)::value>;
      const int64_t groups = layout.threads / layout.lanes;
      const size_t shared =
          dweight && groups > 1 ? static_cast<size_t>(layout.lanes) * kVecs * E * sizeof(float) : 0;
      // As many blocks as the device holds at once: each sums dweight over all the rows it visits.
      const auto blocks = static_cast<unsigned>(
          std::min<int64_t>((rows + groups - 1) / groups, resident_blocks(kernel, layout.threads, shared)));
      launch_chained(kernel, blocks, layout.threads, shared, on_device(x), on_device(weight), on_device(dout),
                     rows, dim, eps, layout.lanes, accumulate, on_device(dx), dweight);
    };
    wide ? launch(std::true_type()) : launch(std::false_type());
  });
  check_launch("rms_norm_backward");
}

template <typename T>
void silu_mul_backward(const T* gate_up, const T* dout, int64_t rows, int64_t inter, T* dgate_up) {
  const int64_t pieces = (inter + Vec<device_t<T>>::kSize - 1) / Vec<device_t<T>>::kSize, n = rows * pieces;
  if (n == 0) return;
  launch_chained(silu_mul_backward_kernel<device_t<T>>, grid_for(n, kThreads), kThreads, 0,
                 on_device(gate_up), on_device(dout), inter, pieces, n,
                 wide_access<T>(inter, gate_up, dout, dgate_up), on_device(dgate_up));
  check_launch("silu_mul_backward");
}

template <typename T>
void embedding_backward(const int32_t* ids, const T* dout, int64_t rows, int64_t hidden, float* dtable) {
  const int64_t n = rows * hidden;
  if (n == 0) return;
  launch_chained(embedding_backward_kernel<device_t<T>>, grid_for(n, kThreads), kThreads, 0, ids,
                 on_device(dout), hidden, n, dtable);
  check_launch("embedding_backward");
}

template <typename T>
void cross_entropy(const T* logits, const int32_t* labels, int64_t rows, int64_t vocab, float grad_scale,
                   float* loss, T* dlogits) {
  check_cuda(cudaMemsetAsync(loss, 0, sizeof(float), current_stream()), "cross_entropy's loss");
  if (rows == 0) return;
  using D = device_t<T>;
  constexpr size_t kMaxStash = 200 << 10;  // of the 227 KB a block may take, leaving the kernel's own
  static const bool configured = (allow_shared_bytes(cross_entropy_kernel<D>, kMaxStash), true);
  (void)configured;
  const int64_t pieces = std::min<int64_t>((vocab + Vec<D>::kSize - 1) / Vec<D>::kSize,
                                           static_cast<int64_t>(kMaxStash / sizeof(Vec<D>)));
  launch_chained(cross_entropy_kernel<D>, static_cast<unsigned>(rows), kLossThreads, pieces * sizeof(Vec<D>),
                 on_device(logits), labels, vocab, grad_scale, wide_access<T>(vocab, logits, dlogits),
                 pieces * Vec<D>::kSize, loss, on_device(dlogits));
  check_launch("cross_entropy");
}

void sum_squares(const float* x, int64_t n, float* out) {
  if (n == 0) return;
  launch_chained(sum_squares_kernel, std::min<unsigned>(grid_for(n, kThreads), 1024), kThreads, 0, x, n, out);
  check_launch("sum_squares");
}

template <typename P>
void adamw(float* w, const float* grad, float* m, float* v, P* param, const AdamWScalars& s, int64_t n) {
  if (n == 0) return;
  launch_chained(adamw_kernel<device_t<P>>, grid_for(n, kThreads), kThreads, 0, w, grad, m, v,
                 on_device(param), s, n);
  check_launch("adamw");
}

template <typename T>
void add_scaled_columns(const ScaledColumnsBlock<T>* blocks, int count, bool accumulate) {
  using D = device_t<T>;
  ScaledColumnsBlocks<D> all{};
  all.count = count;
  for (int k = 0; k < count; ++k) {
    const ScaledColumnsBlock<T>& b = blocks[k];
    all.block[k] = {on_device(b.out), b.out_cols, b.out_column, on_device(b.x), b.x_cols,
                    b.x_column,       b.rows,     b.width,      b.scale};
    all.first[k + 1] = all.first[k] + b.rows * b.width;
  }
  const int64_t n = all.first[count];
  if (n == 0) return;
  launch_chained(add_scaled_columns_kernel<D>, grid_for(n, kThreads), kThreads, 0, all, accumulate);
  check_launch("add_scaled_columns_");
}

template <typename T>
void dropout(const T* x, float p, uint64_t seed, int64_t n, T* out) {
  if (n == 0) return;
  launch_chained(dropout_kernel<device_t<T>>, grid_for(n, kThreads), kThreads, 0, on_device(x), p, seed, n,
                 on_device(out));
  check_launch("dropout");
}

#define TFM_TRAINING_LAUNCHERS(T)                                                                     \
  template void column_sums<T>(const T*, int64_t, int64_t, float*);                                   \
  template void rms_norm_backward<T>(const T*, const T*, const T*, int64_t, int64_t, float, bool, T*, \
                                     float*);                                                         \
  template void silu_mul_backward<T>(const T*, const T*, int64_t, int64_t, T*);                       \
  template void embedding_backward<T>(const int32_t*, const T*, int64_t, int64_t, float*);            \
  template void cross_entropy<T>(const T*, const int32_t*, int64_t, int64_t, float, float*, T*);      \
  template void adamw<T>(float*, const float*, float*, float*, T*, const AdamWScalars&, int64_t);     \
  template void add_scaled_columns<T>(const ScaledColumnsBlock<T>*, int, bool);                       \
  template void dropout<T>(const T*, float, uint64_t, int64_t, T*);
TFM_TRAINING_LAUNCHERS(float)
TFM_TRAINING_LAUNCHERS(bfloat16)
TFM_TRAINING_LAUNCHERS(float16)

}  // namespace tfm::cuda::launch

// The CPU's training kernels: each forward op's backward, the loss and the AdamW step (op_set.h says what
// each computes; linear's backward is beside its forward, in linear.cpp). Plain C++ over each dtype's storage
// type with float32 arithmetic, parallel with OpenMP where threads write disjoint outputs; these are also the
// reference other devices' training kernels are tested against, and the finite-difference checks in
// tests/train test them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tfm/backend/cpu/cpu_backend.h"
#include "tfm/backend/cpu/rows.h"
#include "tfm/backend/sampling_math.h"
#include "tfm/core/floats.h"
#include "tfm/core/parallel.h"

namespace tfm::cpu {
namespace {

// Sums over rows, each of `parts` threads summing its own rows into its own part, then the parts added into
// the accumulator in part order (the same float32 sums at every run).
class RowSums {
 public:
  RowSums(const Tensor& accumulator, int64_t parts, int64_t width)
      : accumulator_(accumulator), width_(width), sums_(accumulator.defined() ? parts * width : 0, 0.f) {}
  float* part(int64_t p) { return sums_.empty() ? nullptr : sums_.data() + p * width_; }
  void add_to_accumulator() const {
    if (sums_.empty()) return;
    float* out = accumulator_.data<float>();
    for (int64_t i = 0; i < width_; ++i) {
      float sum = 0.f;
      for (size_t p = 0; p < sums_.size() / width_; ++p) sum += sums_[p * width_ + i];
      out[i] += sum;
    }
  }

 private:
  const Tensor& accumulator_;
  int64_t width_;
  std::vector<float> sums_;
};

// Threads a kernel summing dweight over `rows` rows splits them among: one part a thread.
int64_t row_parts(int64_t rows) {
  return std::max<int64_t>(std::min<int64_t>(rows, 64), 1);
}

template <typename T>
void rms_norm_backward(const op::RmsNormBackward& a) {
  const int64_t D = a.weight.size(0), rows = a.x.numel() / std::max<int64_t>(D, 1), parts = row_parts(rows);
  RowSums dweight(a.dweight, parts, D);
  T* dx = a.dx.defined() ? a.dx.data<T>() : nullptr;
  parallel_for(parts, {.enabled = rows * D > 16384}, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) {
      for (int64_t r = part * rows / parts; r < (part + 1) * rows / parts; ++r) {
        rms_norm_backward_row(a.x.data<T>() + r * D, a.weight.data<T>(), a.dout.data<T>() + r * D, D, a.eps,
                              dx ? dx + r * D : nullptr, dweight.part(part), a.accumulate);
      }
    }
  });
  dweight.add_to_accumulator();
}

// Row t's q and k head gradients rotated back and through their norms, its v heads' copied, into dqkv's row.
template <typename T>
void qkv_rope_backward(const op::QkvRopeBackward& a) {
  const int64_t rows = a.dq.size(0), heads = a.dq.size(1), D = a.dq.size(2), kv = a.dk.size(1);
  const int64_t rot = a.cos.size(1), width = a.qkv.size(1), parts = row_parts(rows);
  RowSums dq_norm(a.dq_norm, parts, D), dk_norm(a.dk_norm, parts, D);
  parallel_for(parts, {.enabled = rows * width > 16384}, [&](int64_t begin, int64_t end) {
    std::vector<T> g(static_cast<size_t>(D));
    for (int64_t part = begin; part < end; ++part) {
      for (int64_t t = part * rows / parts; t < (part + 1) * rows / parts; ++t) {
        const T* x = a.qkv.data<T>() + t * width;
        T* dx = a.dqkv.data<T>() + t * width;
        for (int64_t j = 0; j < heads + kv; ++j) {
          const bool is_q = j < heads;
          std::copy_n(is_q ? a.dq.data<T>() + (t * heads + j) * D : a.dk.data<T>() + (t * kv + j - heads) * D,
                      D, g.data());
          rope_head(g.data(), a.cos.data<T>() + t * rot, a.sin.data<T>() + t * rot, rot);
          const Tensor& norm = is_q ? a.q_norm : a.k_norm;
          if (norm.defined()) {
            rms_norm_backward_row(x + j * D, norm.data<T>(), g.data(), D, a.eps, dx + j * D,
                                  (is_q ? dq_norm : dk_norm).part(part));
          } else {
            std::copy_n(g.data(), D, dx + j * D);
          }
        }
        std::copy_n(a.dv.data<T>() + t * kv * D, kv * D, dx + (heads + kv) * D);
      }
    }
  });
  dq_norm.add_to_accumulator();
  dk_norm.add_to_accumulator();
}

template <typename T>
void silu_mul_backward(const op::SiluMulBackward& a) {
  const int64_t rows = a.dout.size(0), I = a.dout.size(1);
  parallel_for(rows, {.enabled = rows * I > 16384}, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const T* g = a.gate_up.data<T>() + t * 2 * I;
      const T* u = g + I;
      const T* dout = a.dout.data<T>() + t * I;
      T* dg = a.dgate_up.data<T>() + t * 2 * I;
      T* du = dg + I;
      for (int64_t i = 0; i < I; ++i) {
        const float gate = to_float(g[i]), up = to_float(u[i]), d = to_float(dout[i]);
        const float s = 1.f / (1.f + std::exp(-gate));
        dg[i] = from_float<T>(d * up * s * (1.f + gate * (1.f - s)));
        du[i] = from_float<T>(d * round_to<T>(gate * s));
      }
    }
  });
}

template <typename T>
void embedding_backward(const op::EmbeddingBackward& a) {
  const int64_t rows = a.ids.size(0), H = a.dout.size(1), V = a.dtable.size(0);
  const int32_t* ids = a.ids.data<int32_t>();
  for (int64_t t = 0; t < rows; ++t)
    check(ids[t] >= 0 && ids[t] < V, "embedding_backward: id ", ids[t], " is not in [0, ", V, ")");
  // Columns in parallel: a token that occurs twice adds to one row, which one thread owns per column range.
  parallel_for(H, {.enabled = rows * H > 16384}, [&](int64_t begin, int64_t end) {
    for (int64_t t = 0; t < rows; ++t) {
      const T* d = a.dout.data<T>() + t * H;
      float* row = a.dtable.data<float>() + int64_t{ids[t]} * H;
      for (int64_t h = begin; h < end; ++h) row[h] += to_float(d[h]);
    }
  });
}

// Attention's backward one (sequence, kv head) at a time, so that the threads' dk and dv rows are their own:
// for each query row of the group, the softmax is recomputed, then dP = dout v, dS = P (dP - dout . out), and
// dq = scale dS k, dk += scale dS q, dv += P dout.
template <typename T>
void attention_backward(const op::AttentionBackward& a) {
  const int64_t heads = a.q.size(1), kv_heads = a.k.size(1), D = a.q.size(2), group = heads / kv_heads;
  const int64_t S = a.query_start.size(0) - 1;
  const int32_t* starts = a.query_start.data<int32_t>();
  for (int64_t s = 0; s < S; ++s)
    check(starts[s] >= 0 && starts[s] <= starts[s + 1] && starts[s + 1] <= a.q.size(0),
          "attention_backward: query_start is not an increasing split of ", a.q.size(0), " rows");
  auto at = [D](const Tensor& t, int64_t row, int64_t head, int64_t heads_of) {
    return t.data<T>() + (row * heads_of + head) * D;
  };
  parallel_for(S * kv_heads, {.enabled = a.q.numel() * 16 > 65536, .chunk = 1}, [&](int64_t begin, int64_t end) {
    std::vector<float> p, dk, dv, dq(static_cast<size_t>(D)), q(static_cast<size_t>(D)), g(static_cast<size_t>(D));
    for (int64_t pair = begin; pair < end; ++pair) {
      const int64_t s = pair / kv_heads, kvh = pair % kv_heads;
      const int64_t first_row = starts[s], n = starts[s + 1] - starts[s];
      dk.assign(static_cast<size_t>(n * D), 0.f);
      dv.assign(static_cast<size_t>(n * D), 0.f);
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t row = first_row + i;
          const int64_t j0 = a.window > 0 ? std::max<int64_t>(0, i - a.window + 1) : 0;
          for (int64_t c = 0; c < D; ++c) {
            q[c] = to_float(at(a.q, row, h, heads)[c]);
            g[c] = to_float(at(a.dout, row, h, heads)[c]);
          }
          p.resize(static_cast<size_t>(i - j0 + 1));
          float max = -std::numeric_limits<float>::infinity();
          for (int64_t j = j0; j <= i; ++j) {
            const T* k = at(a.k, first_row + j, kvh, kv_heads);
            float dot = 0.f;
            for (int64_t c = 0; c < D; ++c) dot += q[c] * to_float(k[c]);
            max = std::max(max, p[j - j0] = dot * a.scale);
          }
          float sum = 0.f;
          for (float& x : p) sum += x = std::exp(x - max);
          float out_dot = 0.f;  // dout . out = sum over keys of P dP
          for (int64_t c = 0; c < D; ++c) out_dot += g[c] * to_float(at(a.out, row, h, heads)[c]);
          std::fill(dq.begin(), dq.end(), 0.f);
          for (int64_t j = j0; j <= i; ++j) {
            const float pj = p[j - j0] / sum;
            const T* v = at(a.v, first_row + j, kvh, kv_heads);
            const T* k = at(a.k, first_row + j, kvh, kv_heads);
            float dp = 0.f;
            for (int64_t c = 0; c < D; ++c) dp += g[c] * to_float(v[c]);
            const float ds = pj * (dp - out_dot) * a.scale;
            float* dkj = dk.data() + j * D;
            float* dvj = dv.data() + j * D;
            for (int64_t c = 0; c < D; ++c) {
              dq[c] += ds * to_float(k[c]);
              dkj[c] += ds * q[c];
              dvj[c] += pj * g[c];
            }
          }
          T* dq_out = at(a.dq, row, h, heads);
          for (int64_t c = 0; c < D; ++c) dq_out[c] = from_float<T>(dq[c]);
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        T* dk_out = at(a.dk, first_row + j, kvh, kv_heads);
        T* dv_out = at(a.dv, first_row + j, kvh, kv_heads);
        for (int64_t c = 0; c < D; ++c) {
          dk_out[c] = from_float<T>(dk[j * D + c]);
          dv_out[c] = from_float<T>(dv[j * D + c]);
        }
      }
    }
  });
}

constexpr int32_t kIgnoreIndex = op::CrossEntropy::kIgnoreIndex;

template <typename T>
void cross_entropy(const op::CrossEntropy& a) {
  const int64_t rows = a.logits.size(0), V = a.logits.size(1);
  const int32_t* labels = a.labels.data<int32_t>();
  for (int64_t r = 0; r < rows; ++r)
    check(labels[r] == kIgnoreIndex || (labels[r] >= 0 && labels[r] < V), "cross_entropy: label ", labels[r],
          " is neither -100 nor in [0, ", V, ")");
  std::vector<double> row_loss(static_cast<size_t>(rows), 0.);
  parallel_for(rows, {.enabled = rows * V > 16384}, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* x = a.logits.data<T>() + r * V;
      T* d = a.dlogits.data<T>() + r * V;
      if (labels[r] == kIgnoreIndex) {
        std::fill_n(d, V, from_float<T>(0.f));
        continue;
      }
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < V; ++i) max = std::max(max, to_float(x[i]));
      float sum = 0.f;
      for (int64_t i = 0; i < V; ++i) sum += std::exp(to_float(x[i]) - max);
      const float log_sum = std::log(sum);
      row_loss[static_cast<size_t>(r)] = log_sum - (to_float(x[labels[r]]) - max);
      // Written after every read of the row: dlogits may be the logits.
      for (int64_t i = 0; i < V; ++i) {
        const float p = std::exp(to_float(x[i]) - max - log_sum);
        d[i] = from_float<T>((p - (i == labels[r] ? 1.f : 0.f)) * a.grad_scale);
      }
    }
  });
  double total = 0.;
  for (double l : row_loss) total += l;
  a.loss.data<float>()[0] = static_cast<float>(total);
}

template <typename T>
void add_scaled_columns(const op::AddScaledColumns& a) {
  for (const op::ScaledColumns& b : a.blocks) {
    const int64_t rows = b.out.size(0), N = b.out.size(1), M = b.x.size(1);
    parallel_for(rows, {.enabled = rows * b.width > 65536}, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        T* out = b.out.data<T>() + r * N + b.out_column;
        const T* x = b.x.data<T>() + r * M + b.x_column;
        for (int64_t c = 0; c < b.width; ++c) {
          const float scaled = round_to<T>(b.scale * to_float(x[c]));
          out[c] = from_float<T>(a.accumulate ? to_float(out[c]) + scaled : scaled);
        }
      }
    });
  }
}

template <typename T>
void dropout(const op::Dropout& a) {
  const int64_t n = a.x.numel();
  const uint64_t key = splitmix64(a.seed);
  const float keep_scale = 1.f / (1.f - a.p);
  const T* x = a.x.data<T>();
  T* out = a.out.data<T>();
  parallel_for(n, {.enabled = n > 65536}, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      out[i] = dropout_uniform(key, i) >= a.p ? from_float<T>(to_float(x[i]) * keep_scale) : from_float<T>(0.f);
    }
  });
}

void sum_squares(const op::SumSquares& a) {
  double total = 0.;
  const float* x = a.x.data<float>();
  for (int64_t i = 0; i < a.x.numel(); ++i) total += double{x[i]} * x[i];
  a.out.data<float>()[0] += static_cast<float>(total);
}

void adamw(const op::AdamW& a) {
  const int64_t n = a.master.numel();
  const AdamWScalars s = a.scalars();
  float* w = a.master.data<float>();
  float* m = a.exp_avg.data<float>();
  float* v = a.exp_avg_sq.data<float>();
  const float* grad = a.grad.data<float>();
  parallel_for(n, {.enabled = n > 65536}, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float g = grad[i] * s.grad_scale;
      w[i] *= s.decay;
      m[i] += (g - m[i]) * s.one_minus_beta1;
      v[i] = v[i] * s.beta2 + s.one_minus_beta2 * g * g;
      w[i] -= s.step_size * m[i] / (std::sqrt(v[i]) / s.bias2_sqrt + s.eps);
    }
  });
  if (a.param.defined()) {
    visit_float(a.param.dtype(), [&]<typename P>() {
      P* p = a.param.data<P>();
      for (int64_t i = 0; i < n; ++i) p[i] = from_float<P>(w[i]);
    });
  }
}

}  // namespace

void register_training_kernels(KernelRegistry& r) {
  constexpr DeviceType cpu = DeviceType::cpu;
  for (DType d : kComputeDTypes) {
    visit_float(d, [&]<typename T>() {
      r.add<op::RmsNormBackward>(cpu, d, "default", {.run = rms_norm_backward<T>, .is_default = true});
      r.add<op::SiluMulBackward>(cpu, d, "default", {.run = silu_mul_backward<T>, .is_default = true});
      r.add<op::EmbeddingBackward>(cpu, d, "default", {.run = embedding_backward<T>, .is_default = true});
      r.add<op::AttentionBackward>(cpu, d, "default", {.run = attention_backward<T>, .is_default = true});
      r.add<op::QkvRopeBackward>(cpu, d, "default", {.run = qkv_rope_backward<T>, .is_default = true});
      r.add<op::CrossEntropy>(cpu, d, "default", {.run = cross_entropy<T>, .is_default = true});
      r.add<op::AddScaledColumns>(cpu, d, "default", {.run = add_scaled_columns<T>, .is_default = true});
      r.add<op::Dropout>(cpu, d, "default", {.run = dropout<T>, .is_default = true});
    });
  }
  r.add<op::SumSquares>(cpu, DType::float32, "default", {.run = sum_squares, .is_default = true});
  r.add<op::AdamW>(cpu, DType::float32, "default", {.run = adamw, .is_default = true});
}

}  // namespace tfm::cpu

// Each training op of the CPU against a float64 reference on fresh random inputs: backward ops against
// central differences of a float64 forward (the gradient of sum(forward * R) for a random R, which is what the
// backward gets as its output's gradient), the loss against its float64 value, AdamW against torch's update
// written out in float64. The CPU kernels are the reference the devices' training kernels are tested against
// (tests/kernels), so these checks are what ties every device to the mathematics.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "tfm/core/error.h"
#include "tfm/core/tensor.h"
#include "tfm/ops/ops.h"

namespace tfm {
namespace {

using Vec = std::vector<double>;

Vec random_vec(int64_t n, std::mt19937& rng, double scale = 1.0) {
  std::uniform_real_distribution<double> dist(-scale, scale);
  Vec v(static_cast<size_t>(n));
  for (double& x : v) x = dist(rng);
  return v;
}

Tensor floats(const Vec& v, const Shape& shape) {
  Tensor t = Tensor::cpu(shape, DType::float32);
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = static_cast<float>(v[i]);
  return t;
}

Tensor ints(const std::vector<int32_t>& v) {
  Tensor t = Tensor::cpu({static_cast<int64_t>(v.size())}, DType::int32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

Tensor zeros(const Shape& shape) {
  return Tensor::cpu(shape, DType::float32);
}

// d loss / d v by central differences; `loss` reads v.
Vec numeric_gradient(Vec& v, const std::function<double()>& loss) {
  Vec g(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i], h = 1e-5 * std::max(1.0, std::fabs(keep));
    v[i] = keep + h;
    const double up = loss();
    v[i] = keep - h;
    const double down = loss();
    v[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

// max |got - want| within `tol` of max |want|.
void expect_close(const Tensor& got, const Vec& want, double tol, const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got.data<float>()[i];
    ASSERT_FALSE(std::isnan(g)) << what << ": element " << i;
    diff = std::max(diff, std::fabs(g - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  EXPECT_GT(scale, 0) << what << ": a gradient of zeros tests nothing";
  EXPECT_LE(diff, tol * scale) << what << ": max error " << diff << " at scale " << scale;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

constexpr double kTol = 2e-4;  // float32 kernels against float64 differences

TEST(BackwardOps, LinearAgainstDifferences) {
  std::mt19937 rng(1);
  const int64_t M = 5, K = 7, N = 6;
  Vec x = random_vec(M * K, rng), w = random_vec(N * K, rng), b = random_vec(N, rng), R = random_vec(M * N, rng);
  auto loss = [&] {
    double s = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double y = b[n];
        for (int64_t k = 0; k < K; ++k) y += x[m * K + k] * w[n * K + k];
        s += y * R[m * N + n];
      }
    return s;
  };
  Tensor dx = zeros({M, K}), dw = zeros({N, K}), dbias = zeros({N});
  // Accumulators add: start dw from ones and expect ones plus the gradient.
  std::fill_n(dw.data<float>(), dw.numel(), 1.f);
  ops::linear_backward(floats(x, {M, K}), floats(w, {N, K}), floats(R, {M, N}), dx, dw, dbias);
  Vec want_dw = numeric_gradient(w, loss);
  for (double& v : want_dw) v += 1;
  expect_close(dx, numeric_gradient(x, loss), kTol, "dx");
  expect_close(dw, want_dw, kTol, "dw");
  expect_close(dbias, numeric_gradient(b, loss), kTol, "dbias");
  // Undefined outputs are skipped.
  Tensor none, dx_only = zeros({M, K});
  ops::linear_backward(floats(x, {M, K}), floats(w, {N, K}), floats(R, {M, N}), dx_only, none, none);
  expect_close(dx_only, numeric_gradient(x, loss), kTol, "dx alone");
}

TEST(BackwardOps, RmsNormAgainstDifferences) {
  std::mt19937 rng(2);
  const int64_t rows = 4, D = 9;
  const double eps = 1e-6;
  Vec x = random_vec(rows * D, rng, 2.0), w = random_vec(D, rng), R = random_vec(rows * D, rng);
  auto loss = [&] {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double ms = 0;
      for (int64_t i = 0; i < D; ++i) ms += x[r * D + i] * x[r * D + i];
      const double inv = 1 / std::sqrt(ms / D + eps);
      for (int64_t i = 0; i < D; ++i) s += w[i] * x[r * D + i] * inv * R[r * D + i];
    }
    return s;
  };
  Tensor dx = zeros({rows, D}), dweight = zeros({D});
  ops::rms_norm_backward(floats(x, {rows, D}), floats(w, {D}), static_cast<float>(eps), floats(R, {rows, D}), dx,
                         dweight);
  expect_close(dx, numeric_gradient(x, loss), kTol, "dx");
  expect_close(dweight, numeric_gradient(w, loss), kTol, "dweight");
}

TEST(BackwardOps, SiluMulAgainstDifferences) {
  std::mt19937 rng(3);
  const int64_t T = 3, I = 8;
  Vec gu = random_vec(T * 2 * I, rng, 3.0), R = random_vec(T * I, rng);
  auto loss = [&] {
    double s = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < I; ++i) {
        const double g = gu[t * 2 * I + i], u = gu[t * 2 * I + I + i];
        s += g / (1 + std::exp(-g)) * u * R[t * I + i];
      }
    return s;
  };
  Tensor dgu = zeros({T, 2 * I});
  ops::silu_mul_backward(floats(gu, {T, 2 * I}), floats(R, {T, I}), dgu);
  expect_close(dgu, numeric_gradient(gu, loss), kTol, "dgate_up");
}

TEST(BackwardOps, EmbeddingAddsEveryOccurrence) {
  std::mt19937 rng(4);
  const int64_t V = 6, H = 5;
  const std::vector<int32_t> ids{3, 1, 3, 0, 3};
  const int64_t T = static_cast<int64_t>(ids.size());
  Vec table = random_vec(V * H, rng), R = random_vec(T * H, rng);
  auto loss = [&] {
    double s = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) s += table[ids[t] * H + h] * R[t * H + h];
    return s;
  };
  Tensor dtable = zeros({V, H});
  ops::embedding_backward(ints(ids), floats(R, {T, H}), dtable);
  expect_close(dtable, numeric_gradient(table, loss), kTol, "dtable");
  EXPECT_THROW(ops::embedding_backward(ints({0, 6}), floats(random_vec(2 * H, rng), {2, H}), dtable), Error);
}

// Causal attention of ragged sequences (each from position 0), grouped heads and a window, in float64.
struct AttentionShape {
  std::vector<int32_t> starts;
  int64_t heads, kv_heads, D, window;
};

Vec attention_forward(const AttentionShape& s, const Vec& q, const Vec& k, const Vec& v, double scale) {
  const int64_t T = s.starts.back(), group = s.heads / s.kv_heads;
  Vec out(static_cast<size_t>(T * s.heads * s.D), 0.0);
  for (size_t seq = 0; seq + 1 < s.starts.size(); ++seq) {
    for (int64_t i = s.starts[seq]; i < s.starts[seq + 1]; ++i) {
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t kvh = h / group;
        const int64_t first = s.window > 0 ? std::max<int64_t>(s.starts[seq], i - s.window + 1) : s.starts[seq];
        std::vector<double> p;
        double max = -1e300, sum = 0;
        for (int64_t j = first; j <= i; ++j) {
          double d = 0;
          for (int64_t c = 0; c < s.D; ++c) d += q[(i * s.heads + h) * s.D + c] * k[(j * s.kv_heads + kvh) * s.D + c];
          p.push_back(d * scale);
          max = std::max(max, p.back());
        }
        for (double& x : p) sum += x = std::exp(x - max);
        for (int64_t j = first; j <= i; ++j)
          for (int64_t c = 0; c < s.D; ++c)
            out[(i * s.heads + h) * s.D + c] += p[j - first] / sum * v[(j * s.kv_heads + kvh) * s.D + c];
      }
    }
  }
  return out;
}

TEST(BackwardOps, AttentionAgainstDifferences) {
  std::mt19937 rng(5);
  for (const AttentionShape& s : {AttentionShape{{0, 5, 6, 9}, 4, 2, 6, 0}, AttentionShape{{0, 7}, 2, 1, 4, 3},
                                  AttentionShape{{0, 4, 11}, 3, 3, 5, 0}}) {
    const int64_t T = s.starts.back();
    const double scale = 1 / std::sqrt(static_cast<double>(s.D));
    Vec q = random_vec(T * s.heads * s.D, rng, 2.0), k = random_vec(T * s.kv_heads * s.D, rng, 2.0),
        v = random_vec(T * s.kv_heads * s.D, rng), R = random_vec(T * s.heads * s.D, rng);
    auto loss = [&] { return dot(attention_forward(s, q, k, v, scale), R); };
    const Shape qs{T, s.heads, s.D}, ks{T, s.kv_heads, s.D};
    Tensor dq = zeros(qs), dk = zeros(ks), dv = zeros(ks);
    ops::attention_backward(floats(q, qs), floats(k, ks), floats(v, ks), floats(attention_forward(s, q, k, v, scale), qs),
                            floats(R, qs), ints(s.starts), static_cast<float>(scale), s.window, dq, dk, dv);
    const std::string what = "attention of " + std::to_string(s.starts.size() - 1) + " sequences, window " +
                             std::to_string(s.window);
    expect_close(dq, numeric_gradient(q, loss), kTol, what + " dq");
    expect_close(dk, numeric_gradient(k, loss), kTol, what + " dk");
    expect_close(dv, numeric_gradient(v, loss), kTol, what + " dv");
  }
}

TEST(BackwardOps, RopeBackIsTheRotationBack) {
  // The layers take rope's gradient as rope_ with the sine negated.
  std::mt19937 rng(6);
  const int64_t T = 3, heads = 2, D = 8, rot = 6;
  Vec x = random_vec(T * heads * D, rng), R = random_vec(T * heads * D, rng), angle = random_vec(T * rot / 2, rng, 3.0);
  Vec cos(static_cast<size_t>(T * rot)), sin(cos.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < rot; ++i) {
      cos[t * rot + i] = std::cos(angle[t * rot / 2 + i % (rot / 2)]);
      sin[t * rot + i] = std::sin(angle[t * rot / 2 + i % (rot / 2)]);
    }
  auto loss = [&] {
    double s = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        const double* v = x.data() + (t * heads + h) * D;
        for (int64_t i = 0; i < D; ++i) {
          double y = v[i];
          if (i < rot / 2) y = v[i] * cos[t * rot + i] - v[i + rot / 2] * sin[t * rot + i];
          else if (i < rot) y = v[i] * cos[t * rot + i] + v[i - rot / 2] * sin[t * rot + i];
          s += y * R[(t * heads + h) * D + i];
        }
      }
    return s;
  };
  Vec neg_sin = sin;
  for (double& v : neg_sin) v = -v;
  Tensor grad = floats(R, {T, heads, D});
  ops::rope_(grad, floats(cos, {T, rot}), floats(neg_sin, {T, rot}));
  expect_close(grad, numeric_gradient(x, loss), kTol, "rope's gradient");
}

TEST(BackwardOps, CrossEntropyLossAndGradient) {
  std::mt19937 rng(7);
  const int64_t rows = 5, V = 11;
  const std::vector<int32_t> labels{3, -100, 0, 10, 3};
  const double grad_scale = 0.25;
  Vec logits = random_vec(rows * V, rng, 4.0);
  auto loss = [&] {
    double s = 0;
    for (int64_t r = 0; r < rows; ++r) {
      if (labels[r] == -100) continue;
      double max = -1e300, sum = 0;
      for (int64_t i = 0; i < V; ++i) max = std::max(max, logits[r * V + i]);
      for (int64_t i = 0; i < V; ++i) sum += std::exp(logits[r * V + i] - max);
      s += std::log(sum) + max - logits[r * V + labels[r]];
    }
    return s;
  };
  const double want_loss = loss();
  Tensor out = zeros({1}), dlogits = zeros({rows, V});
  ops::cross_entropy(floats(logits, {rows, V}), ints(labels), static_cast<float>(grad_scale), out, dlogits);
  EXPECT_NEAR(out.data<float>()[0], want_loss, 1e-5 * want_loss);
  Vec want = numeric_gradient(logits, loss);
  for (double& g : want) g *= grad_scale;
  expect_close(dlogits, want, kTol, "dlogits");
  // In place, as the model runs it: the logits become their gradient.
  Tensor in_place = floats(logits, {rows, V});
  ops::cross_entropy(in_place, ints(labels), static_cast<float>(grad_scale), out, in_place);
  expect_close(in_place, want, kTol, "dlogits in place");
  EXPECT_THROW(ops::cross_entropy(floats(logits, {rows, V}), ints({0, 0, 0, 0, 11}), 1.f, out, dlogits), Error);
}

TEST(TrainingOps, SumSquaresAdds) {
  std::mt19937 rng(8);
  Vec x = random_vec(1000, rng);
  Tensor out = zeros({1});
  out.data<float>()[0] = 2.f;
  ops::sum_squares(floats(x, {1000}), out);
  EXPECT_NEAR(out.data<float>()[0], 2 + dot(x, x), 1e-5 * dot(x, x));
}

TEST(TrainingOps, AdamWFollowsTorchOverSteps) {
  std::mt19937 rng(9);
  const int64_t n = 257;
  const ops::AdamWStep base{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1,
                            .grad_scale = 0.5, .step = 1};
  Vec w = random_vec(n, rng), m(static_cast<size_t>(n), 0.0), v(m);
  Tensor master = floats(w, {n}), exp_avg = zeros({n}), exp_avg_sq = zeros({n}), param = Tensor::cpu({n}, DType::bfloat16);
  for (int64_t step = 1; step <= 5; ++step) {
    Vec g = random_vec(n, rng);
    for (double& x : g) x = static_cast<float>(x);  // the values the kernel sees
    ops::AdamWStep s = base;
    s.step = step;
    ops::adamw(master, floats(g, {n}), exp_avg, exp_avg_sq, param, s);
    // torch.optim.AdamW's single-tensor update in float64.
    const double b1 = 1 - std::pow(0.9, step), b2 = 1 - std::pow(0.999, step);
    for (int64_t i = 0; i < n; ++i) {
      const double gi = g[i] * 0.5;
      w[i] *= 1 - 1e-2 * 0.1;
      m[i] += (gi - m[i]) * (1 - 0.9);
      v[i] = v[i] * 0.999 + (1 - 0.999) * gi * gi;
      w[i] -= 1e-2 / b1 * m[i] / (std::sqrt(v[i]) / std::sqrt(b2) + 1e-8);
    }
  }
  expect_close(master, w, 1e-5, "master weights");
  expect_close(exp_avg, m, 1e-5, "exp_avg");
  expect_close(exp_avg_sq, v, 1e-5, "exp_avg_sq");
  Tensor param_floats = zeros({n});
  ops::cast(param, param_floats);
  expect_close(param_floats, w, 8e-3, "the model's bfloat16 copy");
}

TEST(TrainingOps, ConcatColumnsInvertsSplit) {
  std::mt19937 rng(10);
  const Tensor x = floats(random_vec(4 * 9, rng), {4, 9});
  Tensor a = zeros({4, 2}), b = zeros({4, 3, 1}), c = zeros({4, 4});
  Tensor* const outs[] = {&a, &b, &c};
  ops::split_columns(x, outs);
  Tensor joined = zeros({4, 9});
  const Tensor* const ins[] = {&a, &b, &c};
  ops::concat_columns(ins, joined);
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(joined.data<float>()[i], x.data<float>()[i]) << i;
  Tensor wrong = zeros({4, 8});
  EXPECT_THROW(ops::concat_columns(ins, wrong), Error);
}

// The values of t, for comparing two computations of the same thing.
Vec values(const Tensor& t) {
  return Vec(t.data<float>(), t.data<float>() + t.numel());
}

TEST(TrainingOps, QkvRopeBackwardIsTheRotationAndTheNormsBack) {
  // The fused op against the passes it replaces: rope_ with -sin, rms_norm_backward of each q and k head from
  // its input (qkv's columns), then the columns side by side; the norms' weight gradients added to what they
  // held.
  std::mt19937 rng(11);
  const int64_t T = 5, heads = 4, kv = 2, D = 16, rot = 12, width = (heads + 2 * kv) * D;
  const Tensor qkv = floats(random_vec(T * width, rng, 2.0), {T, width});
  const Tensor q_norm = floats(random_vec(D, rng), {D}), k_norm = floats(random_vec(D, rng), {D});
  const Tensor cos = floats(random_vec(T * rot, rng), {T, rot}),
               neg_sin = floats(random_vec(T * rot, rng), {T, rot});
  const Tensor dq = floats(random_vec(T * heads * D, rng), {T, heads, D});
  const Tensor dk = floats(random_vec(T * kv * D, rng), {T, kv, D}),
               dv = floats(random_vec(T * kv * D, rng), {T, kv, D});
  const Vec dq_norm0 = random_vec(D, rng), dk_norm0 = random_vec(D, rng);
  Tensor dqkv = zeros({T, width}), dq_norm = floats(dq_norm0, {D}), dk_norm = floats(dk_norm0, {D});
  ops::qkv_rope_backward(qkv, q_norm, k_norm, 1e-6f, cos, neg_sin, dq, dk, dv, dqkv, dq_norm, dk_norm);

  Tensor q_in = zeros({T, heads, D}), k_in = zeros({T, kv, D}), v_in = zeros({T, kv, D});
  Tensor* const inputs[] = {&q_in, &k_in, &v_in};
  ops::split_columns(qkv, inputs);
  Tensor gq = floats(values(dq), {T, heads, D}), gk = floats(values(dk), {T, kv, D});
  ops::rope_(gq, cos, neg_sin);
  ops::rope_(gk, cos, neg_sin);
  Tensor want_q = zeros({T, heads, D}), want_k = zeros({T, kv, D});
  Tensor want_dq_norm = floats(dq_norm0, {D}), want_dk_norm = floats(dk_norm0, {D});
  ops::rms_norm_backward(q_in, q_norm, 1e-6f, gq, want_q, want_dq_norm);
  ops::rms_norm_backward(k_in, k_norm, 1e-6f, gk, want_k, want_dk_norm);
  Tensor want = zeros({T, width});
  const Tensor* const parts[] = {&want_q, &want_k, &dv};
  ops::concat_columns(parts, want);
  expect_close(dqkv, values(want), 1e-6, "dqkv");
  expect_close(dq_norm, values(want_dq_norm), 1e-6, "q_norm's gradient");
  expect_close(dk_norm, values(want_dk_norm), 1e-6, "k_norm's gradient");
}

TEST(TrainingOps, RmsNormBackwardAccumulatedIsTheBackwardThenTheAdd) {
  std::mt19937 rng(12);
  const int64_t rows = 6, D = 32;
  const Tensor x = floats(random_vec(rows * D, rng, 2.0), {rows, D}), w = floats(random_vec(D, rng), {D});
  const Tensor dout = floats(random_vec(rows * D, rng), {rows, D});
  const Vec grad0 = random_vec(rows * D, rng);
  Tensor grad = floats(grad0, {rows, D}), no_dweight;
  ops::rms_norm_backward(x, w, 1e-6f, dout, grad, no_dweight, /*accumulate=*/true);
  Tensor dx = zeros({rows, D}), want = floats(grad0, {rows, D});
  ops::rms_norm_backward(x, w, 1e-6f, dout, dx, no_dweight);
  ops::add_(want, dx);
  expect_close(grad, values(want), 0, "the accumulated gradient");
  Tensor into_dout = floats(values(dout), {rows, D});
  EXPECT_THROW(ops::rms_norm_backward(x, w, 1e-6f, into_dout, into_dout, no_dweight, true), Error);
}

}  // namespace
}  // namespace tfm

// The CPU's kernels of the op set but matmul (linear.cpp): plain C++ over each dtype's storage type, parallel
// with OpenMP. Elements are read as float32 (to_float), computed in float32 and rounded back (from_float) where
// op_set.h says torch rounds. These are also the reference other devices' kernels are tested against.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tfm/backend/cpu/cpu_backend.h"
#include "tfm/backend/cpu/rows.h"
#include "tfm/backend/kernel_registry.h"
#include "tfm/backend/pointer_args.h"
#include "tfm/core/floats.h"
#include "tfm/core/parallel.h"

namespace tfm::cpu {
namespace {

// Copies of whole rows do not look at the values: they move elements of T's size, whatever the dtype.
// out[i] = x[rows[i]] for rows of `width` elements; a negative row is skipped (op_set.h).
template <typename T>
void gather(const T* x, const int32_t* rows, int64_t count, int64_t width, T* out) {
  parallel_for(count, {.enabled = count * width > 65536}, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (rows[i] >= 0) std::memcpy(out + i * width, x + int64_t{rows[i]} * width, width * sizeof(T));
    }
  });
}

template <typename T>
void embedding(const op::Embedding& a) {
  gather(a.table.data<T>(), a.ids.data<int32_t>(), a.ids.size(0), a.table.size(1), a.out.data<T>());
}

template <typename T>
void gather_rows(const op::GatherRows& a) {
  gather(a.x.data<T>(), a.rows.data<int32_t>(), a.rows.size(0), a.x.size(1), a.out.data<T>());
}

template <typename T>
void argmax_rows(const op::ArgmaxRows& a) {
  const int64_t V = a.x.size(1);
  for (int64_t r = 0; r < a.x.size(0); ++r) {
    const T* row = a.x.data<T>() + r * V;
    int64_t best = 0;
    bool finite = true;
    for (int64_t i = 0; i < V; ++i) {
      const float v = to_float(row[i]);
      finite = finite && std::isfinite(v);
      if (v > to_float(row[best])) best = i;
    }
    a.ids.data<int32_t>()[r] = finite ? static_cast<int32_t>(best) : -1;
  }
}

template <typename T>
void split_columns(const op::SplitColumns& a) {
  const ColumnSplit s = column_split(a);
  const int64_t rows = a.x.size(0), n = static_cast<int64_t>(s.outs.size());
  int64_t total = 0;
  for (int64_t w : s.widths) total += w;
  const T* x = a.x.data<T>();
  parallel_for(rows, {.enabled = rows * total > 65536}, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const T* row = x + t * total;
      for (int64_t i = 0; i < n; ++i) {
        std::memcpy(static_cast<T*>(s.outs[i]) + t * s.widths[i], row, s.widths[i] * sizeof(T));
        row += s.widths[i];
      }
    }
  });
}

template <typename T>
void concat_columns(const op::ConcatColumns& a) {
  const int64_t rows = a.out.size(0), total = a.out.size(1);
  T* out = a.out.data<T>();
  parallel_for(rows, {.enabled = rows * total > 65536}, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      T* row = out + t * total;
      for (const Tensor* in : a.ins) {
        const int64_t width = in->numel() / rows;
        std::memcpy(row, in->data<T>() + t * width, width * sizeof(T));
        row += width;
      }
    }
  });
}

template <typename T>
void kv_cache_write(const op::KvCacheWrite& a) {
  const int64_t rows = a.k.size(0), kv_dim = rows ? a.k.numel() / rows : 0;
  const int32_t* slots = a.slots.data<int32_t>();
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t slot = slots[t];
    if (slot < 0) continue;  // a padding row
    std::memcpy(a.cache_k.data<T>() + slot * kv_dim, a.k.data<T>() + t * kv_dim, kv_dim * sizeof(T));
    std::memcpy(a.cache_v.data<T>() + slot * kv_dim, a.v.data<T>() + t * kv_dim, kv_dim * sizeof(T));
  }
}

template <typename T>
void add(const op::Add& a) {
  const int64_t n = a.x.numel();
  T* x = a.x.data<T>();
  const T* y = a.y.data<T>();
  parallel_for(n, {.enabled = n > 65536}, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x[i] = from_float<T>(to_float(x[i]) + to_float(y[i]));
  });
}

template <typename In>
void cast(const op::Cast& a) {
  const int64_t n = a.x.numel();
  const In* x = a.x.data<In>();
  visit_float(a.out.dtype(), [&]<typename Out>() {
    Out* out = a.out.data<Out>();
    parallel_for(n, {.enabled = n > 65536}, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = from_float<Out>(to_float(x[i]));
    });
  });
}

template <typename T>
void rms_norm(const op::RmsNorm& a) {
  const int64_t dim = a.weight.size(0), rows = a.x.numel() / std::max<int64_t>(dim, 1);
  parallel_for(rows, {.enabled = rows * dim > 16384}, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      rms_norm_row(a.x.data<T>() + r * dim, a.weight.data<T>(), dim, a.eps, a.out.data<T>() + r * dim);
  });
}

// The residual add and the norm in one pass over each row.
template <typename T>
void add_rms_norm_fused(const op::AddRmsNorm& a) {
  const int64_t dim = a.weight.size(0), rows = a.residual.numel() / std::max<int64_t>(dim, 1);
  parallel_for(rows, {.enabled = rows * dim > 16384}, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      T* h = a.residual.data<T>() + r * dim;
      const T* x = a.x.data<T>() + r * dim;
      for (int64_t i = 0; i < dim; ++i) h[i] = from_float<T>(to_float(h[i]) + to_float(x[i]));
      rms_norm_row(h, a.weight.data<T>(), dim, a.eps, a.out.data<T>() + r * dim);
    }
  });
}

template <typename T>
void rope(const op::Rope& a) {
  const int64_t rows = a.x.size(0), heads = a.x.size(1), head_dim = a.x.size(2), rot = a.cos.size(1);
  parallel_for(rows, {.enabled = rows * heads * head_dim > 16384}, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        rope_head(a.x.data<T>() + (t * heads + h) * head_dim, a.cos.data<T>() + t * rot,
                  a.sin.data<T>() + t * rot, rot);
      }
    }
  });
}

// Row t of the fused projection `qkv` made into attention's inputs: its q heads normalized (where q_norm is
// defined) and rotated into q_row (heads, D), its k heads likewise into k_row and its v heads copied to v_row
// (kv_heads, D each; null: the row's k and v go nowhere).
template <typename T>
void qkv_row(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& cos,
             const Tensor& sin, int64_t t, int64_t heads, int64_t kv, T* q_row, T* k_row, T* v_row) {
  const int64_t D = qkv.size(1) / (heads + 2 * kv), rot = cos.size(1);
  const T* row = qkv.data<T>() + t * qkv.size(1);
  for (int64_t j = 0; j < (k_row ? heads + kv : heads); ++j) {
    const bool is_q = j < heads;
    T* out = is_q ? q_row + j * D : k_row + (j - heads) * D;
    const Tensor& norm = is_q ? q_norm : k_norm;
    if (norm.defined()) {
      rms_norm_row(row + j * D, norm.data<T>(), D, eps, out);
    } else {
      std::copy_n(row + j * D, D, out);
    }
    rope_head(out, cos.data<T>() + t * rot, sin.data<T>() + t * rot, rot);
  }
  if (v_row) std::copy_n(row + (heads + kv) * D, kv * D, v_row);
}

template <typename T>
void qkv_rope_cache(const op::QkvRopeCache& a) {
  const int64_t rows = a.q.size(0), heads = a.q.size(1), D = a.q.size(2), kv = a.cache_k.size(2);
  parallel_for(rows, {.enabled = rows * a.qkv.size(1) > 16384}, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t slot = a.slots.data<int32_t>()[t];
      T* k_row = slot < 0 ? nullptr : a.cache_k.data<T>() + slot * kv * D;
      T* v_row = slot < 0 ? nullptr : a.cache_v.data<T>() + slot * kv * D;
      qkv_row(a.qkv, a.q_norm, a.k_norm, a.eps, a.cos, a.sin, t, heads, kv, a.q.data<T>() + t * heads * D,
              k_row, v_row);
    }
  });
}

template <typename T>
void qkv_rope(const op::QkvRope& a) {
  const int64_t rows = a.q.size(0), heads = a.q.size(1), D = a.q.size(2), kv = a.k.size(1);
  parallel_for(rows, {.enabled = rows * a.qkv.size(1) > 16384}, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      qkv_row(a.qkv, a.q_norm, a.k_norm, a.eps, a.cos, a.sin, t, heads, kv, a.q.data<T>() + t * heads * D,
              a.k.data<T>() + t * kv * D, a.v.data<T>() + t * kv * D);
    }
  });
}

template <typename T>
void silu_mul(const op::SiluMul& a) {
  const int64_t rows = a.out.size(0), I = a.out.size(1);
  parallel_for(rows, {.enabled = rows * I > 16384}, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const T* g = a.gate_up.data<T>() + t * 2 * I;
      const T* u = g + I;
      T* o = a.out.data<T>() + t * I;
      for (int64_t i = 0; i < I; ++i) {
        const float gate = to_float(g[i]);
        o[i] = from_float<T>(round_to<T>(gate / (1.f + std::exp(-gate))) * to_float(u[i]));
      }
    }
  });
}

// norm_linear as the ops it folds together: the reference of the devices' one-pass kernels, and what the cpu
// runs where a model asks for it (no faster here, but the model takes the same path on every device).
template <typename T>
void norm_linear(const op::NormLinear& a) {
  const int64_t M = a.residual.size(0), K = a.residual.size(1), N = a.w.size(0);
  Tensor rows = a.residual;  // without a norm, the linear's rows as given
  if (a.norm_weight.defined()) {
    rows = empty({M, K}, a.dtype(), a.y.device());
    if (a.x.defined()) {
      std::memcpy(a.residual_out.raw(), a.residual.raw(), a.residual.nbytes());
      add_rms_norm_fused<T>(op::AddRmsNorm{a.residual_out, a.x, a.norm_weight, a.eps, rows});
    } else {
      rms_norm<T>(op::RmsNorm{a.residual, a.norm_weight, a.eps, rows});
    }
  }
  Tensor gate_up = a.gated ? empty({M, N}, a.dtype(), a.y.device()) : a.y;
  kernel_registry().run(op::Linear{rows, a.w, a.bias, gate_up}, DeviceType::cpu);
  if (a.gated) silu_mul<T>(op::SiluMul{gate_up, a.y});
}

// Keys per block of the flash form: torch's CPU kernel's block for contexts of 512 keys or more.
constexpr int64_t kKeyBlock = 512;

// Causal grouped-query attention over the paged cache, one (row, head) at a time, spread over threads.
template <typename T, bool Eager>
void attend(const PagedAttentionArgs& a) {
  const int64_t group = a.heads / a.kv_heads, D = a.head_dim;
  const int64_t rows = a.query_start[a.num_seqs];
  const T* q_all = static_cast<const T*>(a.q);
  const T* cache_k = static_cast<const T*>(a.cache_k);
  const T* cache_v = static_cast<const T*>(a.cache_v);
  std::vector<int32_t> seq_of_row(static_cast<size_t>(rows));  // so that (row, head) pairs spread evenly
  for (int64_t s = 0; s < a.num_seqs; ++s) {
    for (int32_t r = a.query_start[s]; r < a.query_start[s + 1]; ++r) seq_of_row[static_cast<size_t>(r)] = s;
  }
  // (row, head) pairs in chunks taken as threads free up: rows of a ragged batch see contexts of any length.
  parallel_for(
      rows * a.heads, {.enabled = rows * a.heads * (a.window > 0 ? a.window : 64) * D > 65536, .chunk = 4},
      [&](int64_t begin, int64_t end) {
        std::vector<float> q(static_cast<size_t>(D)), acc(static_cast<size_t>(D)), scores;
        for (int64_t pair = begin; pair < end; ++pair) {
          const int64_t row = pair / a.heads, h = pair % a.heads;
          const int64_t s = seq_of_row[static_cast<size_t>(row)];
          const int64_t pos = a.positions[row];
          const int64_t last = std::min<int64_t>(pos, a.context_lens[s] - 1);
          const int64_t first = a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : 0;
          const int32_t* blocks = a.block_tables + s * a.max_blocks;
          const int64_t kvh = h / group;
          for (int64_t i = 0; i < D; ++i) q[i] = to_float(q_all[(row * a.heads + h) * D + i]);
          auto cache_row = [&](const T* cache, int64_t j) {
            const int64_t block = blocks[j / a.block_size];
            return cache + ((block * a.block_size + j % a.block_size) * a.kv_heads + kvh) * D;
          };
          auto dot = [&](const T* k) {
            float d = 0.f;
            for (int64_t i = 0; i < D; ++i) d += q[i] * to_float(k[i]);
            return d;
          };
          std::fill(acc.begin(), acc.end(), 0.f);
          float denom = 1.f;
          if constexpr (Eager) {
            scores.assign(static_cast<size_t>(std::max<int64_t>(last - first + 1, 0)), 0.f);
            float max = -std::numeric_limits<float>::infinity();
            for (int64_t j = first; j <= last; ++j) {
              const float score = round_to<T>(round_to<T>(dot(cache_row(cache_k, j))) * a.scale);
              max = std::max(max, scores[j - first] = score);
            }
            float sum = 0.f;
            for (float& sc : scores) sum += sc = std::exp(sc - max);
            for (int64_t j = first; j <= last; ++j) {
              const float p = round_to<T>(scores[j - first] / sum);
              const T* v = cache_row(cache_v, j);
              for (int64_t i = 0; i < D; ++i) acc[i] += p * to_float(v[i]);
            }
          } else {
            // Keys in blocks, as torch's CPU flash attention takes them: each weight is exp(score - the
            // maximum so far, this block's included), rounded to the dtype where it multiplies the values
            // (torch computes P V in the dtype, on the CPU and in CUDA's flash kernels) while the denominator
            // sums it unrounded.
            float max = -std::numeric_limits<float>::infinity();
            denom = 0.f;
            for (int64_t j0 = first; j0 <= last; j0 += kKeyBlock) {
              const int64_t n = std::min(kKeyBlock, last - j0 + 1);
              scores.resize(static_cast<size_t>(n));
              float block_max = max;
              for (int64_t j = 0; j < n; ++j)
                block_max = std::max(block_max, scores[j] = dot(cache_row(cache_k, j0 + j)) * a.scale);
              const float c = std::exp(max - block_max);  // 0 for the first block
              denom *= c;
              for (float& x : acc) x *= c;
              max = block_max;
              for (int64_t j = 0; j < n; ++j) {
                const float p = std::exp(scores[j] - max);
                denom += p;
                const float p_rounded = round_to<T>(p);
                const T* v = cache_row(cache_v, j0 + j);
                for (int64_t i = 0; i < D; ++i) acc[i] += p_rounded * to_float(v[i]);
              }
            }
            if (a.lse) a.lse[row * a.heads + h] = max + std::log(denom);
          }
          T* o = static_cast<T*>(a.out) + (row * a.heads + h) * D;
          const float inv = last >= first ? 1.f / denom : 0.f;
          for (int64_t i = 0; i < D; ++i) o[i] = from_float<T>(acc[i] * inv);
        }
      });
}

template <typename T, bool Eager>
void paged_attention(const op::PagedAttention& a) {
  attend<T, Eager>(paged_attention_args(a));
}

template <typename T>
void paged_attention_lse(const op::PagedAttentionLse& a) {
  attend<T, false>(paged_attention_args(a));
}

// qkv_attention as the two ops it folds: the reference of the devices' one-pass kernels, and what the cpu
// runs where a model asks for it.
template <typename T>
void qkv_attention(const op::QkvAttention& a) {
  Tensor q = empty(a.out.shape(), a.dtype(), a.out.device());
  qkv_rope_cache<T>(op::QkvRopeCache{a.qkv, a.q_norm, a.k_norm, a.eps, a.cos, a.sin, a.meta.slots, q,
                                     a.cache_k, a.cache_v});
  paged_attention<T, false>(op::PagedAttention{q, a.cache_k, a.cache_v, a.meta, a.scale, a.window, a.out});
}

}  // namespace

void register_pointwise_kernels(KernelRegistry& r) {
  constexpr DeviceType cpu = DeviceType::cpu;
  for (DType d : kComputeDTypes) {
    visit_float(d, [&]<typename T>() {
      r.add<op::Embedding>(cpu, d, "default", {.run = embedding<T>, .is_default = true});
      r.add<op::GatherRows>(cpu, d, "default", {.run = gather_rows<T>, .is_default = true});
      r.add<op::ArgmaxRows>(cpu, d, "default", {.run = argmax_rows<T>, .is_default = true});
      r.add<op::SplitColumns>(cpu, d, "default", {.run = split_columns<T>, .is_default = true});
      r.add<op::ConcatColumns>(cpu, d, "default", {.run = concat_columns<T>, .is_default = true});
      r.add<op::KvCacheWrite>(cpu, d, "default", {.run = kv_cache_write<T>, .is_default = true});
      r.add<op::Add>(cpu, d, "default", {.run = add<T>, .is_default = true});
      r.add<op::Cast>(cpu, d, "default", {.run = cast<T>, .is_default = true});
      r.add<op::RmsNorm>(cpu, d, "default", {.run = rms_norm<T>, .is_default = true});
      r.add<op::AddRmsNorm>(cpu, d, "fused", {.run = add_rms_norm_fused<T>});
      r.add<op::NormLinear>(cpu, d, "fused", {.run = norm_linear<T>, .is_default = true});
      r.add<op::Rope>(cpu, d, "default", {.run = rope<T>, .is_default = true});
      r.add<op::QkvRopeCache>(cpu, d, "default", {.run = qkv_rope_cache<T>, .is_default = true});
      r.add<op::QkvRope>(cpu, d, "default", {.run = qkv_rope<T>, .is_default = true});
      r.add<op::SiluMul>(cpu, d, "default", {.run = silu_mul<T>, .is_default = true});
      r.add<op::PagedAttention>(cpu, d, "flash", {.run = paged_attention<T, false>, .is_default = true});
      r.add<op::PagedAttention>(cpu, d, "eager", {.run = paged_attention<T, true>});
      r.add<op::PagedAttentionLse>(cpu, d, "flash", {.run = paged_attention_lse<T>, .is_default = true});
      r.add<op::QkvAttention>(cpu, d, "flash", {.run = qkv_attention<T>, .is_default = true});
    });
  }
}

}  // namespace tfm::cpu

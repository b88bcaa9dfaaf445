#include "tfm/backend/cpu/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace tfm::cpu {

void embedding(const float* table, const int32_t* ids, int64_t T, int64_t H, float* out) {
#pragma omp parallel for
  for (int64_t t = 0; t < T; ++t)
    std::memcpy(out + t * H, table + static_cast<int64_t>(ids[t]) * H, H * sizeof(float));
}

void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out) {
#pragma omp parallel for if (rows * dim > 16384)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    float sum = 0.f;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i] * xr[i];
    const float inv = 1.f / std::sqrt(sum / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) o[i] = weight[i] * (xr[i] * inv);
  }
}

void rope(float* x, const float* cos, const float* sin, int64_t T, int64_t heads, int64_t head_dim,
          int64_t rot_dim) {
  const int64_t half = rot_dim / 2;
#pragma omp parallel for if (T * heads * head_dim > 16384)
  for (int64_t t = 0; t < T; ++t) {
    const float* c = cos + t * rot_dim;
    const float* s = sin + t * rot_dim;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i + half] + a * s[i + half];
      }
    }
  }
}

void silu_mul(const float* gate_up, int64_t T, int64_t I, float* out) {
#pragma omp parallel for if (T * I > 16384)
  for (int64_t t = 0; t < T; ++t) {
    const float* g = gate_up + t * 2 * I;
    const float* u = g + I;
    float* o = out + t * I;
    for (int64_t i = 0; i < I; ++i) o[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
  }
}

void add_inplace(float* x, const float* y, int64_t n) {
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void split_columns(const float* x, int64_t T, float* const* outs, const int64_t* widths, int64_t n) {
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) total += widths[i];
#pragma omp parallel for if (T * total > 65536)
  for (int64_t t = 0; t < T; ++t) {
    const float* row = x + t * total;
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(outs[i] + t * widths[i], row, widths[i] * sizeof(float));
      row += widths[i];
    }
  }
}

void gather_rows(const float* x, int64_t H, const int32_t* rows, int64_t R, float* out) {
  for (int64_t i = 0; i < R; ++i)
    std::memcpy(out + i * H, x + static_cast<int64_t>(rows[i]) * H, H * sizeof(float));
}

void kv_cache_write(const float* k, const float* v, const int32_t* slots, int64_t T, int64_t kv_dim,
                    float* cache_k, float* cache_v) {
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot = slots[t];
    std::memcpy(cache_k + slot * kv_dim, k + t * kv_dim, kv_dim * sizeof(float));
    std::memcpy(cache_v + slot * kv_dim, v + t * kv_dim, kv_dim * sizeof(float));
  }
}

void paged_attention(const PagedAttentionArgs& a, bool materialize_scores) {
  const int64_t group = a.heads / a.kv_heads;
  const int64_t D = a.head_dim;
  const int64_t T = a.query_start[a.num_seqs];
  // Row -> sequence, so that (row, head) pairs can be spread over threads evenly.
  std::vector<int32_t> seq_of_row(static_cast<size_t>(T));
  for (int64_t s = 0; s < a.num_seqs; ++s) {
    for (int32_t r = a.query_start[s]; r < a.query_start[s + 1]; ++r)
      seq_of_row[static_cast<size_t>(r)] = static_cast<int32_t>(s);
  }
#pragma omp parallel
  {
    std::vector<float> scores;
    std::vector<float> acc(static_cast<size_t>(D));
#pragma omp for collapse(2) schedule(dynamic, 4)
    for (int64_t row = 0; row < T; ++row) {
      for (int64_t h = 0; h < a.heads; ++h) {
        const int64_t s = seq_of_row[static_cast<size_t>(row)];
        const int64_t pos = a.positions[row];
        const int64_t last = std::min<int64_t>(pos, a.context_lens[s] - 1);
        const int64_t first = a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : 0;
        const int32_t* blocks = a.block_tables + s * a.max_blocks;
        const int64_t kvh = h / group;
        const float* q = a.q + (row * a.heads + h) * D;
        auto key_row = [&](int64_t j, const float* cache) {
          const int64_t block = blocks[j / a.block_size];
          return cache + ((block * a.block_size + j % a.block_size) * a.kv_heads + kvh) * D;
        };
        auto dot = [&](const float* k) {
          float d = 0.f;
          for (int64_t i = 0; i < D; ++i) d += q[i] * k[i];
          return d * a.scale;
        };
        std::fill(acc.begin(), acc.end(), 0.f);
        float denom = 0.f;
        if (materialize_scores) {
          scores.assign(static_cast<size_t>(last - first + 1), 0.f);
          float max = -std::numeric_limits<float>::infinity();
          for (int64_t j = first; j <= last; ++j)
            max = std::max(max, scores[j - first] = dot(key_row(j, a.cache_k)));
          for (float& sc : scores) denom += sc = std::exp(sc - max);
          for (int64_t j = first; j <= last; ++j) {
            const float p = scores[j - first] / denom;
            const float* v = key_row(j, a.cache_v);
            for (int64_t i = 0; i < D; ++i) acc[i] += p * v[i];
          }
          denom = 1.f;
        } else {
          float max = -std::numeric_limits<float>::infinity();
          for (int64_t j = first; j <= last; ++j) {
            const float sc = dot(key_row(j, a.cache_k));
            if (sc > max) {  // rescale what was summed under the old maximum
              const float c = std::exp(max - sc);
              denom *= c;
              for (float& x : acc) x *= c;
              max = sc;
            }
            const float p = std::exp(sc - max);
            denom += p;
            const float* v = key_row(j, a.cache_v);
            for (int64_t i = 0; i < D; ++i) acc[i] += p * v[i];
          }
        }
        float* o = a.out + (row * a.heads + h) * D;
        const float inv = last >= first ? 1.f / denom : 0.f;
        for (int64_t i = 0; i < D; ++i) o[i] = acc[i] * inv;
      }
    }
  }
}

}  // namespace tfm::cpu

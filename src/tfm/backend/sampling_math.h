// What the host and every device's kernel share to choose tokens alike (op::SampleRows) and to drop alike
// (op::Dropout): one row's sampling settings as the kernels read them, the counter-based random numbers, and
// the few per-element formulas whose rounding must not differ. The OpenCL kernels repeat these in OpenCL C
// (xpu/kernels/sampling.cl, pointwise.cl). Kept to C++17 so that .cu files can include it.
#pragma once

#include <math.h>

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TFM_HOST_DEVICE __host__ __device__
#else
#define TFM_HOST_DEVICE
#endif

namespace tfm {

// splitmix64's output function: a bijection of 64-bit words in which every input bit reaches every output
// bit, so that splitmix64(key ^ i) over i is a random stream addressed by position, with no state to carry.
TFM_HOST_DEVICE inline uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The key of one sampling step of one sequence: its seed, its stream (sequences sharing a seed differ by it)
// and the step (0 for its first sampled token).
inline uint64_t sampling_key(uint64_t seed, uint64_t stream, uint64_t step) {
  return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ step);
}

// Element i's 24 random bits under `key`, as an exact float in [0, 2^24).
TFM_HOST_DEVICE inline float random_bits24(uint64_t key, int64_t i) {
  return static_cast<float>(splitmix64(key ^ static_cast<uint64_t>(i)) >> 40);
}

// op::Dropout's uniform of element i in [0, 1), under key = splitmix64(the op's seed).
TFM_HOST_DEVICE inline float dropout_uniform(uint64_t key, int64_t i) {
  return random_bits24(key, i) * 0x1p-24f;
}

// Token i's score in the race that draws a step's token: its processed logit plus a Gumbel variable,
// y - log(-log(u)) with u = token i's uniform under `key` in (0, 1) (24 random bits, centred in their
// interval so that neither 0 nor 1 comes out). The largest score wins: the argmax of logits plus independent
// Gumbel noise is distributed as their softmax, so a draw is a reduction over the row, the same on any
// device, with no cumulative sum whose rounding depends on the order of the additions.
TFM_HOST_DEVICE inline float race_score(float y, uint64_t key, int64_t i) {
  const float u = (random_bits24(key, i) + 0.5f) * 0x1p-24f;
  return y - logf(-logf(u));
}

// The host's draw over a row of n processed logits (the Sampler's, and the cpu kernel's): the token with the
// largest race_score among those kept(i) says are candidates, the first on ties; -1 when none is.
template <typename Kept>
int64_t race_winner(const float* y, int64_t n, uint64_t key, Kept kept) {
  int64_t best = -1;
  float best_score = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (!kept(i)) continue;
    const float score = race_score(y[i], key, i);
    if (best < 0 || score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

// A probability weight exp(y - max) in [0, 1] as a 2^-40 fixed-point integer: top-p sums these, and integer
// sums come out the same in any order (a row of 2^24 tokens cannot overflow them).
TFM_HOST_DEVICE inline uint64_t fixed_mass(float weight) {
  return static_cast<uint64_t>(weight * 0x1p40f);
}

// The float's bits as an unsigned integer of the same order (negative values below positive ones, -0 just
// below +0), so that a threshold can be found digit by digit.
TFM_HOST_DEVICE inline uint32_t order_key(float v) {
#if defined(__CUDA_ARCH__)
  const uint32_t bits = __float_as_uint(v);
#else
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
#endif
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}
TFM_HOST_DEVICE inline float from_order_key(uint32_t key) {
  const uint32_t bits = key & 0x80000000u ? key & 0x7fffffffu : ~key;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
#endif
}

// One row's settings for op::SampleRows, as kSampleSettingsWords int32 words (floats as their bits).
struct SampleSettings {
  float temperature;                       // <= 0: greedy
  int32_t top_k;                           // <= 0: no top-k
  float top_p;                             // >= 1: no top-p
  float min_p;                             // <= 0: no min-p
  float repetition_penalty;                // 1: none
  uint32_t key_low, key_high;              // the step's sampling_key
  int32_t penalties_begin, penalties_end;  // the row's entries of op::SampleRows' penalties
};
constexpr int kSampleSettingsWords = 9;
static_assert(sizeof(SampleSettings) == kSampleSettingsWords * sizeof(int32_t),
              "SampleSettings is int32 words");

}  // namespace tfm

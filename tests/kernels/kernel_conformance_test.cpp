// Every registered kernel (op, device, dtype, variant) against the CPU's float32 reference, on the same inputs:
// fresh random values rounded to the kernel's dtype, outputs poisoned with NaN before the run, several shapes
// each (sizes that are multiples of no work-group or tile, decode and prefill rows, ragged sequences). xpu runs
// on the OpenCL test platform and cuda where a GPU is present; kernels of an absent device are skipped. An op
// that has kernels but no cases here fails the test, so a new op cannot go untested.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <type_traits>

#include "../xpu/test_platform.h"
#include "tfm/backend/backend.h"
#include "tfm/backend/kernel_registry.h"
#include "tfm/backend/op_set.h"
#include "tfm/core/floats.h"
#ifdef TFM_HAVE_XPU
#include "tfm/backend/xpu/onednn_matmul.h"
#endif

namespace tfm {
namespace {

// max |got - want| over max |want| allowed, by the kernel's dtype: float32 accumulation order, or a few
// roundings to the dtype (an intermediate one where torch rounds, then the output's).
double tolerance(DType d) {
  return d == DType::float32 ? 2e-5 : d == DType::bfloat16 ? 1.5e-2 : 2e-3;
}

// A test input of an op: host tensors (floats in float32, indices in int32), and how to run the op on them.
struct Case {
  std::string what;
  std::vector<Tensor> inputs;
  // Runs the op on `inputs` (already on the device, floats in the dtype) with `kernel`; returns the tensors
  // it wrote. False when the kernel does not accept these arguments.
  std::function<bool(std::vector<Tensor>& inputs, Device device, DType dtype,
                     const std::function<bool(const void* op_args)>& kernel, std::vector<Tensor>& outputs)>
      run;
};

Tensor random_floats(const Shape& shape, std::mt19937& rng, float scale = 1.f) {
  Tensor t = Tensor::cpu(shape, DType::float32);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

Tensor ints(const std::vector<int32_t>& values, const Shape& shape) {
  Tensor t = Tensor::cpu(shape, DType::int32);
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t;
}

std::vector<int32_t> random_ints(int64_t n, int32_t bound, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(0, bound - 1);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (auto& v : out) v = dist(rng);
  return out;
}

// A host float32 tensor as `dtype` on `device`.
Tensor placed(const Tensor& host, DType dtype, Device device) {
  if (host.dtype() != DType::float32) return to_device(host, device);
  Tensor converted = Tensor::cpu(host.shape(), dtype);
  visit_float(dtype, [&]<typename T>() {
    for (int64_t i = 0; i < host.numel(); ++i) converted.data<T>()[i] = from_float<T>(host.data<float>()[i]);
  });
  return to_device(converted, device);
}

// A device tensor as float32 values on the host.
Tensor as_floats(const Tensor& t) {
  const Tensor host = to_device(t, Device{});
  Tensor out = Tensor::cpu(t.shape(), DType::float32);
  visit_float(t.dtype(), [&]<typename T>() {
    for (int64_t i = 0; i < t.numel(); ++i) out.data<float>()[i] = to_float(host.data<T>()[i]);
  });
  return out;
}

// An output buffer full of NaN, so that an element the kernel fails to write shows.
Tensor poisoned(const Shape& shape, DType dtype, Device device) {
  Tensor nan = Tensor::cpu(shape, DType::float32);
  std::fill_n(nan.data<float>(), nan.numel(), std::numeric_limits<float>::quiet_NaN());
  return placed(nan, dtype, device);
}

// The float inputs rounded to `dtype` (so the reference sees the kernel's values), indices as they are.
std::vector<Tensor> rounded(const std::vector<Tensor>& inputs, DType dtype) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) out.push_back(t.dtype() == DType::float32 ? as_floats(placed(t, dtype, Device{})) : t);
  return out;
}

// A case of `Op`: `make(inputs, device, dtype, kernel, outputs)` allocates the outputs, builds Op's arguments
// and hands them to `kernel`.
template <typename Op, typename Make>
Case make_case(std::string what, std::vector<Tensor> inputs, Make make) {
  Case c;
  c.what = std::move(what);
  c.inputs = std::move(inputs);
  c.run = [make](std::vector<Tensor>& in, Device device, DType dtype,
                 const std::function<bool(const void*)>& kernel, std::vector<Tensor>& out) {
    return make(in, device, dtype, [&](const Op& args) { return kernel(&args); }, out);
  };
  return c;
}

std::string shape_text(std::initializer_list<int64_t> sizes) {
  return shape_str(Shape(sizes));
}

std::vector<Case> embedding_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (int64_t H : {1, 5, 64, 130}) {
    for (int64_t T : {1, 9}) {
      std::vector<int32_t> ids = random_ints(T, 37, rng);
      if (T > 1 && H == 64) ids[3] = -1;  // unwritten (op_set.h)
      cases.push_back(make_case<op::Embedding>(
          "embedding " + shape_text({T, H}), {random_floats({37, H}, rng), ints(ids, {T})},
          [T, H](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
            out = {poisoned({T, H}, dtype, device)};
            return kernel(op::Embedding{in[0], in[1], out[0]});
          }));
    }
  }
  return cases;
}

std::vector<Case> linear_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  // Few-row (decode) and many-row shapes, none a multiple of the usual tiles but some.
  // Rows of whole 16-byte pieces for the GEMVs of up to 8 rows, and K a multiple of 16 for DPAS (Intel).
  const int64_t shapes[][3] = {{1, 1, 1},     {1, 67, 33},  {3, 128, 100},  {8, 257, 65},   {9, 70, 129},
                               {37, 200, 97}, {64, 64, 64}, {130, 33, 250}, {1, 1024, 300}, {5, 264, 77},
                               {8, 2048, 40}, {20, 96, 45}, {2, 3072, 24}};
  for (const auto& [M, K, N] : shapes) {
    for (bool with_bias : {false, true}) {
      std::vector<Tensor> in{random_floats({M, K}, rng), random_floats({N, K}, rng)};
      if (with_bias) in.push_back(random_floats({N}, rng));
      cases.push_back(make_case<op::Linear>(
          "linear " + shape_text({M, K, N}) + (with_bias ? " with bias" : ""), std::move(in),
          [M, N](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
            out = {poisoned({M, N}, dtype, device)};
            const Tensor bias = in.size() > 2 ? in[2] : Tensor();
            return kernel(op::Linear{in[0], in[1], bias, out[0]});
          }));
    }
  }
  // Views inside larger buffers: the kernel must honour their offsets and leave the rest alone.
  for (int64_t M : {2, 20}) {
    const int64_t K = 19, N = 23;
    cases.push_back(make_case<op::Linear>(
        "linear on views, M " + std::to_string(M), {random_floats({M + 3, K}, rng), random_floats({N + 1, K}, rng)},
        [M, N](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
          Tensor y_all = poisoned({M + 2, N}, dtype, device);
          Tensor y = y_all.narrow(2, M);
          const Tensor x = in[0].narrow(3, M), w = in[1].narrow(1, N);
          if (!kernel(op::Linear{x, w, Tensor(), y})) return false;
          out = {y, y_all.narrow(0, 2)};  // the rows before the view must stay NaN
          return true;
        }));
  }
  return cases;
}

std::vector<Case> rms_norm_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (int64_t D : {1, 7, 64, 300, 1030}) {
    for (int64_t rows : {1, 6}) {
      for (bool in_place : {false, true}) {
        cases.push_back(make_case<op::RmsNorm>(
            "rms_norm " + shape_text({rows, D}) + (in_place ? " in place" : ""),
            {random_floats({rows, D}, rng, 3.f), random_floats({D}, rng)},
            [rows, D, in_place](std::vector<Tensor>& in, Device device, DType dtype, auto kernel,
                                std::vector<Tensor>& out) {
              out = {in_place ? in[0] : poisoned({rows, D}, dtype, device)};
              return kernel(op::RmsNorm{in[0], in[1], 1e-6f, out[0]});
            }));
      }
    }
  }
  // cuda's layouts of a row (cuda/rows.cuh): a block of lanes a row for decode's few rows, groups of lanes a
  // warp holding up to four 16-byte pieces each for many rows (the last block's groups partly past the last
  // row), rows too long to hold, and lengths of no whole 16-byte pieces.
  for (const Shape& shape : {Shape{3, 1024}, Shape{37, 2048}, Shape{3, 9000}, Shape{2, 8200}, Shape{1025, 1024},
                             Shape{513, 16, 128}, Shape{8193, 100}}) {
    const int64_t D = shape.back();
    cases.push_back(make_case<op::RmsNorm>(
        "rms_norm " + shape_str(shape), {random_floats(shape, rng, 3.f), random_floats({D}, rng)},
        [shape](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
          out = {poisoned(shape, dtype, device)};
          return kernel(op::RmsNorm{in[0], in[1], 1e-6f, out[0]});
        }));
  }
  // (T, heads, head_dim) normalized per head, as q_norm and k_norm are.
  cases.push_back(make_case<op::RmsNorm>(
      "rms_norm per head", {random_floats({3, 5, 16}, rng), random_floats({16}, rng)},
      [](std::vector<Tensor>& in, Device, DType, auto kernel, std::vector<Tensor>& out) {
        out = {in[0]};
        return kernel(op::RmsNorm{in[0], in[1], 1e-5f, out[0]});
      }));
  return cases;
}

std::vector<Case> add_rms_norm_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  // As rms_norm's: small shapes, then cuda's layouts of a row.
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1},    {6, 1},     {1, 7},    {6, 7},       {1, 64},
                                                {6, 64},   {1, 300},   {6, 300},  {1, 1030},    {6, 1030},
                                                {3, 1024}, {37, 2048}, {3, 9000}, {1025, 1024}, {8193, 100}};
  for (const auto& [rows, D] : shapes) {
    cases.push_back(make_case<op::AddRmsNorm>(
        "add_rms_norm " + shape_text({rows, D}),
        {random_floats({rows, D}, rng, 3.f), random_floats({rows, D}, rng), random_floats({D}, rng)},
        [rows, D](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
          out = {in[0], poisoned({rows, D}, dtype, device)};
          return kernel(op::AddRmsNorm{in[0], in[1], in[2], 1e-6f, out[1]});
        }));
  }
  return cases;
}

// Decode's rows, layer 0's (no pending) and later layers', plain and gated, with and without a bias, and
// without the norm (the SiLU gate alone folded); cuda takes rows of whole 16-byte pieces up to 47 KB of
// normalised rows (K 70 and the float32 rows of 5 x 4096 it refuses).
std::vector<Case> norm_linear_cases(std::mt19937& rng) {
  struct Geometry {
    int64_t M, K, N;
    bool pending, gated, bias, normed = true;
  };
  std::vector<Case> cases;
  for (const Geometry c :
       {Geometry{1, 1024, 48, true, true, false}, Geometry{1, 64, 40, false, false, true},
        Geometry{3, 256, 70, true, false, true}, Geometry{8, 1024, 64, true, true, true},
        Geometry{4, 72, 30, true, true, false}, Geometry{2, 70, 20, true, false, false},
        Geometry{5, 4096, 24, true, true, false}, Geometry{5, 128, 16, false, true, true},
        Geometry{1, 4096, 64, false, true, false, false}, Geometry{3, 264, 34, false, true, true, false},
        Geometry{8, 1024, 40, false, false, false, false}, Geometry{2, 70, 20, false, true, false, false}}) {
    std::vector<Tensor> in{random_floats({c.M, c.K}, rng, 3.f), random_floats({c.K}, rng),
                           random_floats({c.N, c.K}, rng, 0.3f), random_floats({c.M, c.K}, rng),
                           random_floats({c.N}, rng)};
    cases.push_back(make_case<op::NormLinear>(
        "norm_linear " + shape_text({c.M, c.K, c.N}) + (c.pending ? " after a block" : " first") +
            (c.normed ? "" : " without the norm") + (c.gated ? " gated" : "") + (c.bias ? " with bias" : ""),
        std::move(in),
        [c](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
          Tensor residual_out = poisoned({c.M, c.K}, dtype, device);
          Tensor y = poisoned({c.M, c.gated ? c.N / 2 : c.N}, dtype, device);
          const Tensor none;
          const Tensor& pending = c.pending ? in[3] : none;
          const Tensor& norm = c.normed ? in[1] : none;
          const Tensor& bias = c.bias ? in[4] : none;
          if (!kernel(op::NormLinear{in[0], pending, norm, 1e-6f, in[2], bias, c.gated, residual_out, y}))
            return false;
          out = c.pending ? std::vector<Tensor>{y, residual_out} : std::vector<Tensor>{y};
          return true;
        }));
  }
  return cases;
}

std::vector<Case> rope_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  const int64_t shapes[][4] = {{1, 1, 8, 8},    {5, 3, 16, 16},    {4, 2, 10, 4},   {7, 4, 64, 32},
                               {3, 2, 128, 128}, {9, 3, 20, 20},    {33, 16, 128, 128}};
  for (const auto& [T, heads, D, rot] : shapes) {
    cases.push_back(make_case<op::Rope>(
        "rope " + shape_text({T, heads, D, rot}),
        {random_floats({T, heads, D}, rng), random_floats({T, rot}, rng), random_floats({T, rot}, rng)},
        [](std::vector<Tensor>& in, Device, DType, auto kernel, std::vector<Tensor>& out) {
          out = {in[0]};
          return kernel(op::Rope{in[0], in[1], in[2]});
        }));
  }
  return cases;
}

std::vector<Case> silu_mul_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  // cuda takes 16-byte pieces of whole rows (I 64, 1000), and of rows of no whole pieces element by element.
  for (int64_t T : {1, 6, 37}) {
    for (int64_t I : {1, 64, 70, 300, 1000, 1001}) {
      cases.push_back(make_case<op::SiluMul>(
          "silu_mul " + shape_text({T, I}), {random_floats({T, 2 * I}, rng, 8.f)},  // both tails of silu
          [T, I](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
            out = {poisoned({T, I}, dtype, device)};
            return kernel(op::SiluMul{in[0], out[0]});
          }));
    }
  }
  return cases;
}

std::vector<Case> add_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (int64_t n : {1, 1000, 4097, 100003}) {
    cases.push_back(make_case<op::Add>(
        "add " + std::to_string(n), {random_floats({n}, rng), random_floats({n}, rng)},
        [](std::vector<Tensor>& in, Device, DType, auto kernel, std::vector<Tensor>& out) {
          out = {in[0]};
          return kernel(op::Add{in[0], in[1]});
        }));
  }
  cases.push_back(make_case<op::Add>(
      "add on rows of larger buffers", {random_floats({4, 33}, rng), random_floats({4, 33}, rng)},
      [](std::vector<Tensor>& in, Device, DType, auto kernel, std::vector<Tensor>& out) {
        Tensor x = in[0][2];
        out = {in[0]};
        return kernel(op::Add{x, in[1][1]});
      }));
  return cases;
}

std::vector<Case> cast_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (DType to : kComputeDTypes) {
    cases.push_back(make_case<op::Cast>(
        std::string("cast to ") + std::string(dtype_name(to)), {random_floats({3, 77}, rng, 100.f)},
        [to](std::vector<Tensor>& in, Device device, DType, auto kernel, std::vector<Tensor>& out) {
          out = {poisoned({3, 77}, to, device)};
          return kernel(op::Cast{in[0], out[0]});
        }));
  }
  return cases;
}

std::vector<Case> split_columns_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (int64_t T : {1, 4}) {
    cases.push_back(make_case<op::SplitColumns>(
        "split_columns rows " + std::to_string(T), {random_floats({T, 72}, rng)},
        [T](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
          out = {poisoned({T, 3}, dtype, device), poisoned({T, 4, 16}, dtype, device),
                 poisoned({T, 5}, dtype, device)};
          Tensor* const parts[] = {&out[0], &out[1], &out[2]};
          return kernel(op::SplitColumns{in[0], parts});
        }));
  }
  return cases;
}

std::vector<Case> gather_rows_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (int64_t H : {1, 65}) {
    for (int64_t R : {1, 5}) {
      std::vector<int32_t> rows = random_ints(R, 11, rng);
      if (R > 1 && H == 65) rows[2] = -1;  // unwritten (op_set.h)
      cases.push_back(make_case<op::GatherRows>(
          "gather_rows " + shape_text({R, H}), {random_floats({11, H}, rng), ints(rows, {R})},
          [R, H](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
            out = {poisoned({R, H}, dtype, device)};
            return kernel(op::GatherRows{in[0], in[1], out[0]});
          }));
    }
  }
  return cases;
}

// Rows with near ties (the dtype's rounding makes some exact), many equal values (the first must win), a NaN
// and an infinity (-1), and one as wide as Qwen3's vocabulary.
std::vector<Case> argmax_rows_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  auto add = [&](std::string what, Tensor x) {
    const int64_t R = x.size(0);
    cases.push_back(make_case<op::ArgmaxRows>(
        std::move(what), {std::move(x)},
        [R](std::vector<Tensor>& in, Device device, DType, auto kernel, std::vector<Tensor>& out) {
          out = {to_device(ints(std::vector<int32_t>(static_cast<size_t>(R), -1), {R}), device)};
          return kernel(op::ArgmaxRows{in[0], out[0]});
        }));
  };
  for (int64_t V : {1, 7, 1000, 151936}) add("argmax of " + shape_text({3, V}), random_floats({3, V}, rng, 30.f));
  Tensor ties = Tensor::cpu({4, 300}, DType::float32);
  std::uniform_int_distribution<int> small(-2, 2);
  for (int64_t i = 0; i < ties.numel(); ++i) ties.data<float>()[i] = static_cast<float>(small(rng));
  add("argmax of repeated values", ties);
  Tensor invalid = random_floats({3, 500}, rng);
  invalid.data<float>()[123] = std::numeric_limits<float>::quiet_NaN();
  invalid.data<float>()[1000 + 7] = -std::numeric_limits<float>::infinity();
  add("argmax of rows with a NaN and an infinity", invalid);
  // Rows long enough for cuda to split them over blocks, of an odd length (no whole 16-byte pieces): ties
  // across the splits, and a NaN and an infinity far into their rows.
  for (int64_t R : {1, 2}) {
    Tensor split = Tensor::cpu({R, 50003}, DType::float32);
    for (int64_t i = 0; i < split.numel(); ++i) split.data<float>()[i] = static_cast<float>(small(rng));
    add("argmax of " + shape_text({R, 50003}) + " with ties", split);
  }
  Tensor split_invalid = random_floats({2, 50003}, rng);
  split_invalid.data<float>()[41000] = std::numeric_limits<float>::quiet_NaN();
  split_invalid.data<float>()[50003 + 49999] = std::numeric_limits<float>::infinity();
  add("argmax of long rows with a NaN and an infinity", split_invalid);
  return cases;
}

std::vector<Case> kv_cache_write_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (int64_t T : {1, 7}) {
    const int64_t blocks = 5, block_size = 4, kv_heads = 3, D = 6;
    std::vector<int32_t> slots(blocks * block_size);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(static_cast<size_t>(T));
    if (T > 1) slots[1] = -1;  // a padding row writes nothing
    cases.push_back(make_case<op::KvCacheWrite>(
        "kv_cache_write rows " + std::to_string(T),
        {random_floats({T, kv_heads, D}, rng), random_floats({T, kv_heads, D}, rng), ints(slots, {T}),
         random_floats({blocks, block_size, kv_heads, D}, rng), random_floats({blocks, block_size, kv_heads, D}, rng)},
        [](std::vector<Tensor>& in, Device, DType, auto kernel, std::vector<Tensor>& out) {
          out = {in[3], in[4]};
          return kernel(op::KvCacheWrite{in[0], in[1], in[2], in[3], in[4]});
        }));
  }
  return cases;
}

// The heads of the fused projection's output: heads of 16 to 256 dimensions, full and partial rotary, with
// and without Qwen3's q/k norms; 64, 128 and 256 with a rotary half of whole lanes take cuda's lanes kernels,
// the heads of a row's kinds (q, k, v) and rows sharing a warp.
struct QkvShape {
  int64_t heads, kv_heads, D, rot;
  bool norms;
  std::string str() const {
    return "heads " + std::to_string(heads) + "/" + std::to_string(kv_heads) + " dim " + std::to_string(D) +
           " rot " + std::to_string(rot) + (norms ? " with norms" : "");
  }
};
constexpr QkvShape kQkvShapes[] = {{4, 2, 16, 16, true}, {4, 4, 16, 8, false},  {8, 2, 128, 128, true},
                                   {3, 1, 64, 32, true}, {4, 2, 64, 64, false}, {2, 1, 256, 128, true}};

// qkv_rope_cache: with a padding row.
std::vector<Case> qkv_rope_cache_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (const QkvShape c : kQkvShapes) {
    for (int64_t T : {1, 5}) {
      const int64_t blocks = 4, block_size = 4, width = (c.heads + 2 * c.kv_heads) * c.D;
      std::vector<int32_t> slots(blocks * block_size);
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      slots.resize(static_cast<size_t>(T));
      if (T > 1) slots[2] = -1;
      std::vector<Tensor> in{random_floats({T, width}, rng, 2.f), random_floats({T, c.rot}, rng),
                             random_floats({T, c.rot}, rng), ints(slots, {T})};
      if (c.norms) {
        in.push_back(random_floats({c.D}, rng));
        in.push_back(random_floats({c.D}, rng));
      }
      cases.push_back(make_case<op::QkvRopeCache>(
          "qkv_rope_cache " + c.str() + " rows " + std::to_string(T), std::move(in),
          [c, T, blocks, block_size](std::vector<Tensor>& in, Device device, DType dtype, auto kernel,
                                     std::vector<Tensor>& out) {
            out = {poisoned({T, c.heads, c.D}, dtype, device),
                   poisoned({blocks, block_size, c.kv_heads, c.D}, dtype, device),
                   poisoned({blocks, block_size, c.kv_heads, c.D}, dtype, device)};
            const Tensor none;
            const Tensor& q_norm = c.norms ? in[4] : none;
            const Tensor& k_norm = c.norms ? in[5] : none;
            return kernel(op::QkvRopeCache{in[0], q_norm, k_norm, 1e-6f, in[1], in[2], in[3], out[0], out[1], out[2]});
          }));
    }
  }
  return cases;
}

// qkv_rope_cache's shapes, with k and v to tensors of the rows instead of the cache (a training step's).
std::vector<Case> qkv_rope_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (const QkvShape c : kQkvShapes) {
    for (int64_t T : {1, 5}) {
      std::vector<Tensor> in{random_floats({T, (c.heads + 2 * c.kv_heads) * c.D}, rng, 2.f),
                             random_floats({T, c.rot}, rng), random_floats({T, c.rot}, rng)};
      if (c.norms) {
        in.push_back(random_floats({c.D}, rng));
        in.push_back(random_floats({c.D}, rng));
      }
      cases.push_back(make_case<op::QkvRope>(
          "qkv_rope " + c.str() + " rows " + std::to_string(T), std::move(in),
          [c, T](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
            out = {poisoned({T, c.heads, c.D}, dtype, device), poisoned({T, c.kv_heads, c.D}, dtype, device),
                   poisoned({T, c.kv_heads, c.D}, dtype, device)};
            const Tensor none;
            return kernel(op::QkvRope{in[0], c.norms ? in[3] : none, c.norms ? in[4] : none, 1e-6f, in[1],
                                      in[2], out[0], out[1], out[2]});
          }));
    }
  }
  return cases;
}

// Sequences of one attention call: `cached` tokens already in the cache, `fresh` query rows this step.
struct SequenceShape {
  int32_t cached, fresh;
};

struct AttentionCase {
  int64_t heads, kv_heads, head_dim, block_size, window;
  std::vector<SequenceShape> seqs;
};

// A decode step of `seqs` sequences with contexts of 1 to 150 tokens: batched decode, where a device may serve
// every query head of a kv head in one block once there are enough rows for that to fill it (a few hundred
// rows x kv heads).
AttentionCase batched_decode(int64_t heads, int64_t kv_heads, int64_t head_dim, int seqs,
                             int64_t window = 0) {
  AttentionCase c{heads, kv_heads, head_dim, 16, window, {}};
  for (int s = 0; s < seqs; ++s) c.seqs.push_back({s * 37 % 150, 1});
  return c;
}

// The cache blocks and metadata of an attention case: block tables drawn from a shuffled pool with two blocks
// no sequence uses, each sequence's rows at its newest positions with their cache slots. A sequence of cached
// -1 is a padding row, as a captured graph's bucket has: no context and slot -1.
struct PagedBatch {
  int64_t T = 0, S = 0, blocks = 2, max_blocks = 1;
  int32_t max_context = 0;
  std::vector<int32_t> query_start{0}, context_lens, tables, positions, slots;
};

PagedBatch paged_batch(const AttentionCase& c, std::mt19937& rng) {
  PagedBatch b;
  b.S = static_cast<int64_t>(c.seqs.size());
  const auto blocks_of = [&](const SequenceShape& s) {
    return s.cached < 0 ? int64_t{0} : (s.cached + s.fresh + c.block_size - 1) / c.block_size;
  };
  for (const auto& s : c.seqs) {
    b.blocks += blocks_of(s);
    b.max_blocks = std::max(b.max_blocks, blocks_of(s));
  }
  std::vector<int32_t> pool(static_cast<size_t>(b.blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  b.tables.assign(static_cast<size_t>(b.S * b.max_blocks), 0);
  size_t next_block = 0;
  for (int64_t s = 0; s < b.S; ++s) {
    const auto& seq = c.seqs[static_cast<size_t>(s)];
    b.query_start.push_back(b.query_start.back() + seq.fresh);
    b.context_lens.push_back(seq.cached < 0 ? 0 : seq.cached + seq.fresh);
    int32_t* table = b.tables.data() + s * b.max_blocks;
    for (int64_t i = 0; i < blocks_of(seq); ++i) table[i] = pool.at(next_block++);
    for (int32_t i = 0; i < seq.fresh; ++i) {
      const int32_t p = std::max(seq.cached, 0) + i;
      b.positions.push_back(seq.cached < 0 ? 0 : p);
      b.slots.push_back(
          seq.cached < 0 ? -1
                         : static_cast<int32_t>(table[p / c.block_size] * c.block_size + p % c.block_size));
    }
  }
  b.T = b.query_start.back();
  b.max_context = *std::max_element(b.context_lens.begin(), b.context_lens.end());
  return b;
}

std::string attention_text(const AttentionCase& c) {
  std::string what = "attention heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) +
                     " dim " + std::to_string(c.head_dim) + " block " + std::to_string(c.block_size) +
                     " window " + std::to_string(c.window) + " seqs";
  for (const auto& s : c.seqs) what += " " + std::to_string(s.cached) + "+" + std::to_string(s.fresh);
  return what;
}

// paged_attention's cases, or paged_attention_lse's (Op), which keeps each row's log-sum-exp too.
template <typename Op>
std::vector<Case> paged_attention_cases(std::mt19937& rng) {
  const AttentionCase shapes[] = {
      batched_decode(8, 2, 128, 256),
      batched_decode(16, 8, 64, 64),
      // GQA groups of 8, and a window over contexts split across blocks (80 rows of 2 kv heads fill an H100's
      // 132 multiprocessors once, so each row's keys split in two).
      batched_decode(16, 2, 128, 128),
      batched_decode(8, 2, 64, 80, 40),
      // Decode steps (one row per sequence), contexts across several 64-key tiles, GQA ratios 1 and 4.
      {4, 4, 16, 4, 0, {{0, 1}, {69, 1}, {149, 1}}},
      {8, 2, 16, 16, 0, {{10, 1}, {0, 1}, {200, 1}}},
      {8, 2, 80, 4, 5, {{69, 1}, {3, 1}}},  // head_dim past one item per dimension, sliding window
      {4, 1, 32, 16, 70, {{100, 1}}},
      {2, 1, 128, 16, 0, {{300, 1}}},
      // Prefill and mixed steps: several rows per sequence, a row per sequence, windows on and off.
      {4, 4, 16, 4, 0, {{0, 5}, {9, 1}, {130, 17}}},
      {8, 2, 32, 4, 6, {{0, 20}, {7, 3}}},
      {4, 1, 80, 16, 0, {{0, 70}, {65, 2}}},
      {6, 3, 16, 2, 3, {{0, 1}, {0, 9}, {4, 4}}},
      {8, 2, 16, 4, 0, {{70, 20}, {0, 1}}},
      // The head sizes of the one-pass kernels: decode over long contexts (split across blocks), prefill in
      // 64-row tiles with partial last tiles, a chunk after cached tokens, windows, GQA.
      {2, 1, 64, 16, 0, {{400, 1}, {5, 1}, {0, 1}}},
      {4, 2, 128, 16, 0, {{300, 1}, {33, 1}}},
      {2, 2, 256, 16, 100, {{200, 1}, {0, 1}}},
      {4, 2, 64, 16, 0, {{0, 80}, {3, 1}}},
      {4, 1, 128, 16, 0, {{60, 70}, {0, 64}}},
      {2, 2, 256, 16, 40, {{0, 70}}},
      {2, 1, 128, 4, 0, {{0, 1}, {0, 130}, {17, 3}}},
      // A head size the 16-byte loads do not divide, and tiles of rows whose windows start past key 0.
      {4, 2, 20, 4, 0, {{0, 40}, {10, 35}}},
      {4, 2, 64, 16, 9, {{50, 70}, {0, 33}}},
      // Prefill tiles of a GQA group that does not pair up (one head a block where even groups take two).
      {6, 2, 128, 16, 0, {{20, 70}, {0, 3}}},
      // GQA groups of 8, 4 and 3 in decode over split contexts; steps this small keep one head a block, the
      // batched_decode shapes above group them.
      {8, 1, 128, 16, 0, {{300, 1}, {5, 1}}},
      {16, 2, 64, 16, 30, {{150, 1}, {0, 1}}},
      {8, 2, 256, 16, 0, {{90, 1}, {0, 1}}},
      {6, 2, 128, 16, 0, {{100, 1}}},
  };
  // And a few drawn at random (of the head sizes above): sequences of cached and fresh rows, windows, GQA.
  std::vector<AttentionCase> drawn(std::begin(shapes), std::end(shapes));
  for (int i = 0; i < 3; ++i) {
    const int64_t dims[] = {16, 32, 64, 80, 128, 256}, groups[] = {1, 2, 4, 8};
    const int64_t kv_heads = 1 + static_cast<int64_t>(rng() % 2), group = groups[rng() % 4];
    AttentionCase c{kv_heads * group,
                    kv_heads,
                    dims[rng() % 6],
                    int64_t{1} << (rng() % 5),
                    rng() % 2 ? static_cast<int64_t>(1 + rng() % 50) : 0,
                    {}};
    for (int s = 1 + static_cast<int>(rng() % 4); s > 0; --s)
      c.seqs.push_back(
          {static_cast<int32_t>(rng() % 3 ? rng() % 100 : 0), static_cast<int32_t>(1 + rng() % 90)});
    drawn.push_back(c);
  }
  std::vector<Case> cases;
  for (const AttentionCase& c : drawn) {
    const PagedBatch b = paged_batch(c, rng);
    const float scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
    cases.push_back(make_case<Op>(
        attention_text(c),
        {random_floats({b.T, c.heads, c.head_dim}, rng, 2.f),
         random_floats({b.blocks, c.block_size, c.kv_heads, c.head_dim}, rng, 2.f),
         random_floats({b.blocks, c.block_size, c.kv_heads, c.head_dim}, rng), ints(b.query_start, {b.S + 1}),
         ints(b.context_lens, {b.S}), ints(b.tables, {b.S, b.max_blocks}), ints(b.positions, {b.T}),
         ints(b.slots, {b.T})},
        [c, b, scale](std::vector<Tensor>& in, Device device, DType dtype, auto kernel,
                      std::vector<Tensor>& out) {
          op::AttentionMetadata meta{in[3], in[4], in[5], in[6], in[7], b.max_context};
          out = {poisoned({b.T, c.heads, c.head_dim}, dtype, device)};
          if constexpr (std::is_same_v<Op, op::PagedAttentionLse>) {
            out.push_back(poisoned({b.T, c.heads}, DType::float32, device));
            return kernel(op::PagedAttentionLse{in[0], in[1], in[2], meta, scale, c.window, out[0], out[1]});
          } else {
            return kernel(op::PagedAttention{in[0], in[1], in[2], meta, scale, c.window, out[0]});
          }
        }));
  }
  return cases;
}

// Decode steps (one row a sequence) straight from the fused projection: contexts split across blocks,
// windows, GQA grouped by the batch's size or not, rotary over part of the head, Qwen3's q/k norms or none, a
// padding row (no context, slot -1) as a captured graph's bucket has, and a head size the one-pass kernels do
// not take.
std::vector<Case> qkv_attention_cases(std::mt19937& rng) {
  struct Shape {
    AttentionCase attention;
    int64_t rot;
    bool norms;
  };
  const Shape shapes[] = {
      {{2, 1, 64, 16, 0, {{400, 1}, {5, 1}, {0, 1}}}, 64, true},
      {{4, 2, 128, 16, 0, {{300, 1}, {33, 1}, {-1, 1}}}, 128, true},
      {{2, 2, 256, 16, 100, {{200, 1}, {0, 1}}}, 256, false},
      {{8, 2, 128, 16, 0, {{90, 1}, {0, 1}}}, 64, true},
      {{16, 8, 128, 16, 0, {{150, 1}}}, 32, true},
      {batched_decode(8, 2, 128, 256), 128, true},
      {{4, 4, 16, 4, 0, {{0, 1}, {69, 1}}}, 16, true},
      // A head size Intel's sub-group form does not take, so that the portable form folds on Intel's runtime
      // too.
      {{4, 2, 72, 4, 5, {{69, 1}, {3, 1}}}, 72, true},
  };
  std::vector<Case> cases;
  for (const auto& [c, rot, norms] : shapes) {
    const PagedBatch b = paged_batch(c, rng);
    const float scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
    const int64_t width = (c.heads + 2 * c.kv_heads) * c.head_dim;
    std::vector<Tensor> in{random_floats({b.T, width}, rng, 2.f),
                           random_floats({b.T, rot}, rng),
                           random_floats({b.T, rot}, rng),
                           random_floats({b.blocks, c.block_size, c.kv_heads, c.head_dim}, rng, 2.f),
                           random_floats({b.blocks, c.block_size, c.kv_heads, c.head_dim}, rng),
                           ints(b.query_start, {b.S + 1}),
                           ints(b.context_lens, {b.S}),
                           ints(b.tables, {b.S, b.max_blocks}),
                           ints(b.positions, {b.T}),
                           ints(b.slots, {b.T}),
                           random_floats({c.head_dim}, rng),
                           random_floats({c.head_dim}, rng)};
    cases.push_back(make_case<op::QkvAttention>(
        "qkv_" + attention_text(c) + " rot " + std::to_string(rot) + (norms ? " with norms" : ""),
        std::move(in),
        [c, b, scale, norms](std::vector<Tensor>& in, Device device, DType dtype, auto kernel,
                             std::vector<Tensor>& out) {
          const op::AttentionMetadata meta{in[5], in[6], in[7], in[8], in[9], b.max_context, true};
          out = {poisoned({b.T, c.heads, c.head_dim}, dtype, device), in[3], in[4]};
          const Tensor none;
          return kernel(op::QkvAttention{in[0], norms ? in[10] : none, norms ? in[11] : none, 1e-6f, in[1],
                                         in[2], meta, scale, c.window, out[1], out[2], out[0]});
        }));
  }
  return cases;
}

std::vector<Case> concat_columns_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (int64_t T : {1, 7}) {
    cases.push_back(make_case<op::ConcatColumns>(
        "concat_columns rows " + std::to_string(T),
        {random_floats({T, 3}, rng), random_floats({T, 2, 4}, rng), random_floats({T, 1}, rng)},
        [T](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
          out = {poisoned({T, 12}, dtype, device)};
          const Tensor* const ins[] = {&in[0], &in[1], &in[2]};
          return kernel(op::ConcatColumns{ins, out[0]});
        }));
  }
  return cases;
}

// Training ops' float32 accumulators start from the same random values on both sides (they add to them).
Tensor accumulator(const Tensor& host_start, Device device) {
  return placed(host_start, DType::float32, device);
}

std::vector<Case> linear_backward_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (const auto& [M, K, N] : {std::array<int64_t, 3>{1, 5, 3}, {9, 33, 17}, {64, 40, 70}}) {
    for (bool all : {true, false}) {
      const Tensor dw0 = random_floats({N, K}, rng), db0 = random_floats({N}, rng);
      cases.push_back(make_case<op::LinearBackward>(
          "linear_backward " + shape_text({M, K, N}) + (all ? "" : " dx only"),
          {random_floats({M, K}, rng), random_floats({N, K}, rng), random_floats({M, N}, rng)},
          [M, K, all, dw0, db0](std::vector<Tensor>& in, Device device, DType dtype, auto kernel,
                                std::vector<Tensor>& out) {
            out = {poisoned({M, K}, dtype, device)};
            Tensor dw = all ? accumulator(dw0, device) : Tensor(), db = all ? accumulator(db0, device) : Tensor();
            if (!kernel(op::LinearBackward{in[0], in[1], in[2], out[0], dw, db})) return false;
            if (all) out.insert(out.end(), {dw, db});
            return true;
          }));
    }
  }
  return cases;
}

// qkv_rope_cache's shapes and a training batch's (the Qwen3-0.6B shape's heads over 300 rows, so that cuda's
// blocks loop over heads), with and without the norms' weight gradients (frozen norms).
std::vector<Case> qkv_rope_backward_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  std::vector<QkvShape> shapes(std::begin(kQkvShapes), std::end(kQkvShapes));
  shapes.push_back({16, 8, 128, 128, true});
  for (const QkvShape c : shapes) {
    for (int64_t T : {1, 5, 300}) {
      if (T == 300 && c.D != 128) continue;
      for (const bool frozen : {false, true}) {
        if (frozen && !c.norms) continue;
        const int64_t width = (c.heads + 2 * c.kv_heads) * c.D;
        const Tensor dq_norm0 = random_floats({c.D}, rng), dk_norm0 = random_floats({c.D}, rng);
        std::vector<Tensor> in{
            random_floats({T, width}, rng, 2.f),      random_floats({T, c.rot}, rng),
            random_floats({T, c.rot}, rng),           random_floats({T, c.heads, c.D}, rng),
            random_floats({T, c.kv_heads, c.D}, rng), random_floats({T, c.kv_heads, c.D}, rng)};
        if (c.norms) {
          in.push_back(random_floats({c.D}, rng));
          in.push_back(random_floats({c.D}, rng));
        }
        cases.push_back(make_case<op::QkvRopeBackward>(
            "qkv_rope_backward " + c.str() + " rows " + std::to_string(T) + (frozen ? " frozen norms" : ""),
            std::move(in),
            [c, T, width, frozen, dq_norm0, dk_norm0](std::vector<Tensor>& in, Device device, DType dtype,
                                                      auto kernel, std::vector<Tensor>& out) {
              out = {poisoned({T, width}, dtype, device)};
              if (c.norms && !frozen)
                out.insert(out.end(), {accumulator(dq_norm0, device), accumulator(dk_norm0, device)});
              const Tensor none;
              Tensor no_dq_norm, no_dk_norm;
              return kernel(op::QkvRopeBackward{
                  in[0], c.norms ? in[6] : none, c.norms ? in[7] : none, 1e-6f, in[1], in[2], in[3], in[4],
                  in[5], out[0], out.size() > 1 ? out[1] : no_dq_norm, out.size() > 1 ? out[2] : no_dk_norm});
            }));
      }
    }
  }
  return cases;
}

std::vector<Case> rms_norm_backward_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  // Beside small shapes, cuda's layouts of a row as for rms_norm, a training batch's hidden rows among them.
  for (const Shape& shape : {Shape{1, 7}, Shape{6, 64}, Shape{3, 4, 16}, Shape{130, 300}, Shape{3, 1024},
                             Shape{1, 2048}, Shape{37, 1030}, Shape{3, 9000}, Shape{2049, 256},
                             Shape{513, 16, 128}, Shape{5001, 100}, Shape{2049, 1024}}) {
    const int64_t D = shape.back();
    const Tensor dw0 = random_floats({D}, rng);
    cases.push_back(make_case<op::RmsNormBackward>(
        "rms_norm_backward " + shape_str(shape),
        {random_floats(shape, rng, 3.f), random_floats({D}, rng), random_floats(shape, rng)},
        [shape, dw0](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
          out = {poisoned(shape, dtype, device), accumulator(dw0, device)};
          return kernel(op::RmsNormBackward{in[0], in[1], 1e-6f, in[2], out[0], out[1]});
        }));
  }
  // dx written over dout, and no dweight (a frozen norm).
  for (const Shape& shape : {Shape{5, 64}, Shape{1025, 1024}}) {
    cases.push_back(make_case<op::RmsNormBackward>(
        "rms_norm_backward into dout " + shape_str(shape),
        {random_floats(shape, rng, 3.f), random_floats({shape.back()}, rng), random_floats(shape, rng)},
        [](std::vector<Tensor>& in, Device, DType, auto kernel, std::vector<Tensor>& out) {
          out = {in[2]};
          Tensor no_dweight;
          return kernel(op::RmsNormBackward{in[0], in[1], 1e-6f, in[2], out[0], no_dweight});
        }));
  }
  // dx += the gradient (the residual stream's add), with and without dweight; cuda's layouts of a row.
  for (const Shape& shape : {Shape{5, 64}, Shape{37, 1030}, Shape{2049, 1024}, Shape{3, 9000}}) {
    const Tensor dx0 = random_floats(shape, rng), dw0 = random_floats({shape.back()}, rng);
    for (const bool with_dweight : {true, false}) {
      cases.push_back(make_case<op::RmsNormBackward>(
          "rms_norm_backward accumulated " + shape_str(shape) + (with_dweight ? "" : " no dweight"),
          {random_floats(shape, rng, 3.f), random_floats({shape.back()}, rng), random_floats(shape, rng)},
          [dx0, dw0, with_dweight](std::vector<Tensor>& in, Device device, DType dtype, auto kernel,
                                   std::vector<Tensor>& out) {
            out = {placed(dx0, dtype, device)};
            if (with_dweight) out.push_back(accumulator(dw0, device));
            Tensor no_dweight;
            return kernel(op::RmsNormBackward{in[0], in[1], 1e-6f, in[2], out[0],
                                              with_dweight ? out[1] : no_dweight, true});
          }));
    }
  }
  return cases;
}

std::vector<Case> silu_mul_backward_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (const auto& [T, I] : {std::pair<int64_t, int64_t>{1, 5}, {9, 64}, {33, 300}, {37, 1000}, {3, 1001}}) {
    cases.push_back(make_case<op::SiluMulBackward>(
        "silu_mul_backward " + shape_text({T, I}), {random_floats({T, 2 * I}, rng, 3.f), random_floats({T, I}, rng)},
        [T, I](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
          out = {poisoned({T, 2 * I}, dtype, device)};
          return kernel(op::SiluMulBackward{in[0], in[1], out[0]});
        }));
  }
  return cases;
}

std::vector<Case> embedding_backward_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (const auto& [T, H] : {std::pair<int64_t, int64_t>{1, 3}, {40, 64}}) {
    const Tensor table0 = random_floats({11, H}, rng);
    cases.push_back(make_case<op::EmbeddingBackward>(
        "embedding_backward " + shape_text({T, H}), {ints(random_ints(T, 11, rng), {T}), random_floats({T, H}, rng)},
        [table0](std::vector<Tensor>& in, Device device, DType, auto kernel, std::vector<Tensor>& out) {
          out = {accumulator(table0, device)};
          return kernel(op::EmbeddingBackward{in[0], in[1], out[0]});
        }));
  }
  return cases;
}

// Each row's log-sum-exp of its scaled scores (natural log) over the keys it sees, in double from the inputs'
// values, on `device`: what a training forward keeps (paged_attention_lse) for attention_backward.
// q (T, heads, D), k (T, kv_heads, D); sequences start at position 0.
Tensor forward_lse(const Tensor& q_in, const Tensor& k_in, const std::vector<int32_t>& starts, int64_t window,
                   float scale, Device device) {
  const Tensor q = as_floats(q_in), k = as_floats(k_in);
  const int64_t heads = q.size(1), kv_heads = k.size(1), D = q.size(2);
  Tensor lse = Tensor::cpu({q.size(0), heads}, DType::float32);
  for (size_t s = 0; s + 1 < starts.size(); ++s) {
    for (int64_t i = starts[s]; i < starts[s + 1]; ++i) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t first = window > 0 ? std::max<int64_t>(starts[s], i - window + 1) : starts[s];
        std::vector<double> scores;
        for (int64_t j = first; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += double{q.data<float>()[(i * heads + h) * D + d]} *
                   k.data<float>()[(j * kv_heads + h / (heads / kv_heads)) * D + d];
          scores.push_back(dot * scale);
        }
        const double max = *std::max_element(scores.begin(), scores.end());
        double sum = 0;
        for (double x : scores) sum += std::exp(x - max);
        lse.data<float>()[i * heads + h] = static_cast<float>(max + std::log(sum));
      }
    }
  }
  return to_device(lse, device);
}

std::vector<Case> attention_backward_cases(std::mt19937& rng) {
  struct Shape_ {
    std::vector<int32_t> starts;
    int64_t heads, kv_heads, D, window;
  };
  std::vector<Case> cases;
  for (const Shape_& c :
       {Shape_{{0, 1}, 2, 1, 8, 0}, Shape_{{0, 5, 6, 30}, 4, 2, 16, 0}, Shape_{{0, 70}, 2, 2, 64, 9},
        Shape_{{0, 3, 200}, 8, 2, 128, 0}, Shape_{{0, 130, 131, 300}, 4, 1, 64, 100},
        Shape_{{0, 45, 90}, 6, 3, 20, 0}, Shape_{{0, 40}, 2, 1, 256, 7}, Shape_{{0, 90, 97}, 6, 2, 64, 0}}) {
    const int64_t T = c.starts.back(), S = static_cast<int64_t>(c.starts.size()) - 1;
    const Shape qs{T, c.heads, c.D}, ks{T, c.kv_heads, c.D};
    const float scale = 1.f / std::sqrt(static_cast<float>(c.D));
    int64_t longest = 0;
    for (int64_t s = 0; s < S; ++s) longest = std::max<int64_t>(longest, c.starts[s + 1] - c.starts[s]);
    // Each shape also with the forward's log-sum-exp given, which a kernel may read instead of computing it,
    // and with the longest sequence's rows known, by which a kernel may size a workspace.
    for (bool with_lse : {false, true}) {
      for (int64_t max_rows : {int64_t{0}, longest}) {
        cases.push_back(make_case<op::AttentionBackward>(
            "attention_backward heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) +
                " dim " + std::to_string(c.D) + " rows " + std::to_string(T) + " window " +
                std::to_string(c.window) + (with_lse ? " with the forward's lse" : "") +
                (max_rows ? " max_rows known" : ""),
            {random_floats(qs, rng, 2.f), random_floats(ks, rng, 2.f), random_floats(ks, rng),
             random_floats(qs, rng), random_floats(qs, rng), ints(c.starts, {S + 1})},
            [c, qs, ks, scale, with_lse, max_rows](std::vector<Tensor>& in, Device device, DType dtype,
                                                   auto kernel, std::vector<Tensor>& out) {
              out = {poisoned(qs, dtype, device), poisoned(ks, dtype, device), poisoned(ks, dtype, device)};
              const Tensor lse =
                  with_lse ? forward_lse(in[0], in[1], c.starts, c.window, scale, device) : Tensor();
              return kernel(op::AttentionBackward{in[0], in[1], in[2], in[3], in[4], in[5], scale, c.window,
                                                  out[0], out[1], out[2], lse, max_rows});
            }));
      }
    }
  }
  return cases;
}

std::vector<Case> cross_entropy_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  // Rows of whole 16-byte pieces and not (151,937, 1,001), and -inf logits (masked tokens) at the start of
  // each row and further on.
  for (const auto& [R, V] : {std::pair<int64_t, int64_t>{1, 7}, {9, 1000}, {4, 151936}, {3, 151937}, {3, 1001}}) {
    std::vector<int32_t> labels = random_ints(R, static_cast<int32_t>(V), rng);
    if (R > 1) labels[1] = -100;
    Tensor logits = random_floats({R, V}, rng, 5.f);
    for (int64_t r = 0; r < R && V > 500; ++r) {
      for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{17}, V / 2, V - 1}) {
        if (i != labels[static_cast<size_t>(r)]) logits.data<float>()[r * V + i] = -std::numeric_limits<float>::infinity();
      }
    }
    cases.push_back(make_case<op::CrossEntropy>(
        "cross_entropy " + shape_text({R, V}), {logits, ints(labels, {R})},
        [R, V](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
          out = {poisoned({1}, DType::float32, device), poisoned({R, V}, dtype, device)};
          return kernel(op::CrossEntropy{in[0], in[1], 0.125f, out[0], out[1]});
        }));
  }
  return cases;
}

std::vector<Case> sum_squares_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (int64_t n : {1, 1000, 70001}) {
    cases.push_back(make_case<op::SumSquares>(
        "sum_squares " + std::to_string(n), {random_floats({n}, rng)},
        [](std::vector<Tensor>& in, Device device, DType, auto kernel, std::vector<Tensor>& out) {
          out = {placed(Tensor::cpu({1}, DType::float32), DType::float32, device)};
          return kernel(op::SumSquares{in[0], out[0]});
        }));
  }
  return cases;
}

std::vector<Case> adamw_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (int64_t n : {1, 1000, 70001}) {
    for (bool with_copy : {false, true}) {
      Tensor v0 = random_floats({n}, rng);
      for (int64_t i = 0; i < n; ++i) v0.data<float>()[i] = std::fabs(v0.data<float>()[i]);  // a second moment
      cases.push_back(make_case<op::AdamW>(
          "adamw " + std::to_string(n) + (with_copy ? " with a bfloat16 copy" : ""),
          {random_floats({n}, rng), random_floats({n}, rng), random_floats({n}, rng, 0.1f), v0},
          [n, with_copy](std::vector<Tensor>& in, Device device, DType, auto kernel, std::vector<Tensor>& out) {
            out = {in[0], in[2], in[3]};
            if (with_copy) out.push_back(poisoned({n}, DType::bfloat16, device));
            Tensor param = with_copy ? out[3] : Tensor();
            return kernel(op::AdamW{out[0], in[1], out[1], out[2], param, 1e-3, 0.9, 0.999, 1e-8, 0.01, 0.5, 3});
          }));
    }
  }
  return cases;
}

// One block, and LoRA's blocks of a stacked B: three written over their columns of row blocks of one matrix
// (its other columns keep their values), or added from such a matrix into three others.
std::vector<Case> add_scaled_columns_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (int64_t T : {1, 7}) {
    cases.push_back(make_case<op::AddScaledColumns>(
        "add_scaled_columns_ rows " + std::to_string(T),
        {random_floats({T, 40}, rng), random_floats({T, 24}, rng)},
        [](std::vector<Tensor>& in, Device, DType, auto kernel, std::vector<Tensor>& out) {
          out = {in[0]};
          const op::ScaledColumns block{in[0], 8, in[1], 5, 17, 0.37f};
          return kernel(op::AddScaledColumns{{&block, 1}, true});
        }));
  }
  for (const bool accumulate : {false, true}) {
    cases.push_back(make_case<op::AddScaledColumns>(
        std::string("add_scaled_columns_ three blocks, ") + (accumulate ? "added" : "written"),
        {random_floats({12, 9}, rng), random_floats({5, 2}, rng), random_floats({3, 4}, rng),
         random_floats({4, 3}, rng)},
        [accumulate](std::vector<Tensor>& in, Device, DType, auto kernel, std::vector<Tensor>& out) {
          // written: the stacked matrix's row blocks [0, 5), [5, 8), [8, 12) take the small ones side by
          // side; added: the small ones take those blocks of it.
          const Tensor rows[] = {in[0].narrow(0, 5), in[0].narrow(5, 3), in[0].narrow(8, 4)};
          std::vector<op::ScaledColumns> blocks;
          for (int b = 0, column = 0; b < 3; column += in[b + 1].size(1), ++b) {
            blocks.push_back(
                accumulate ? op::ScaledColumns{in[b + 1], 0, rows[b], column, in[b + 1].size(1), 0.5f + b}
                           : op::ScaledColumns{rows[b], column, in[b + 1], 0, in[b + 1].size(1), 0.5f + b});
          }
          out = accumulate ? std::vector<Tensor>{in[1], in[2], in[3]} : std::vector<Tensor>{in[0]};
          return kernel(op::AddScaledColumns{blocks, accumulate});
        }));
  }
  return cases;
}

// y starts from the same random values on both sides (the product adds to them).
std::vector<Case> linear_add_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (const auto& [M, K, N] : {std::array<int64_t, 3>{1, 16, 40}, {37, 48, 300}, {130, 8, 97}}) {
    for (bool by_columns : {false, true}) {  // w (N, K), or (K, N)
      cases.push_back(make_case<op::LinearAdd>(
          "linear_add " + shape_text({M, K, N}) + (by_columns ? " by columns" : ""),
          {random_floats({M, K}, rng), random_floats(by_columns ? Shape{K, N} : Shape{N, K}, rng),
           random_floats({M, N}, rng)},
          [by_columns](std::vector<Tensor>& in, Device, DType, auto kernel, std::vector<Tensor>& out) {
            out = {in[2]};
            return kernel(op::LinearAdd{in[0], in[1], in[2], by_columns});
          }));
    }
  }
  return cases;
}

std::vector<Case> dropout_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (float p : {0.f, 0.1f, 0.5f}) {
    cases.push_back(make_case<op::Dropout>(
        "dropout p " + std::to_string(p), {random_floats({5, 300}, rng)},
        [p](std::vector<Tensor>& in, Device device, DType dtype, auto kernel, std::vector<Tensor>& out) {
          out = {poisoned({5, 300}, dtype, device)};
          return kernel(op::Dropout{in[0], p, 1234, out[0]});
        }));
  }
  return cases;
}

// Rows of sampling settings and their penalties as op::SampleRows takes them.
struct SamplingRows {
  std::vector<SampleSettings> rows;
  std::vector<int32_t> penalties;

  void add(float temperature, int32_t top_k, float top_p, float min_p, uint64_t key,
           const std::vector<std::pair<int32_t, float>>& penalized = {}, float repetition_penalty = 1.f) {
    const auto begin = static_cast<int32_t>(penalties.size() / 2);
    for (const auto& [token, amount] : penalized) penalties.insert(penalties.end(), {token, std::bit_cast<int32_t>(amount)});
    rows.push_back({temperature, top_k, top_p, min_p, repetition_penalty, static_cast<uint32_t>(key),
                    static_cast<uint32_t>(key >> 32), begin, static_cast<int32_t>(penalties.size() / 2)});
  }
  Tensor settings() const {
    Tensor t = Tensor::cpu({static_cast<int64_t>(rows.size()), kSampleSettingsWords}, DType::int32);
    std::memcpy(t.data<int32_t>(), rows.data(), rows.size() * sizeof(SampleSettings));
    return t;
  }
  Tensor penalty_entries() const {
    std::vector<int32_t> p = penalties.empty() ? std::vector<int32_t>{-1, 0} : penalties;
    return ints(p, {static_cast<int64_t>(p.size() / 2), 2});
  }
};

// Every rule of op::SampleRows alone and together, each with draws under several keys: greedy, temperature,
// top-k of 1 and past the row, a tiny and a usual top-p, min-p, penalties (one outside the row, which is
// ignored); rows of ties (top-k and top-p cut inside a run of equal values), a row with one finite value,
// rows with no distribution (NaN, +inf, all -inf: -1), rows as wide as Qwen3's vocabulary and one past a
// power of two, and rows that devices split (runs of equal values across slices).
std::vector<Case> sample_rows_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  auto add = [&](std::string what, Tensor logits, const SamplingRows& rows) {
    const int64_t R = logits.size(0);
    cases.push_back(make_case<op::SampleRows>(
        std::move(what), {std::move(logits), rows.settings(), rows.penalty_entries()},
        [R](std::vector<Tensor>& in, Device device, DType, auto kernel, std::vector<Tensor>& out) {
          out = {to_device(ints(std::vector<int32_t>(static_cast<size_t>(R), -7), {R}), device)};
          return kernel(op::SampleRows{in[0], in[1], in[2], out[0]});
        }));
  };
  auto every_rule = [&](int64_t V, uint64_t key) {
    SamplingRows rows;
    const int32_t t = static_cast<int32_t>(V / 3);
    const std::vector<std::pair<int32_t, float>> penalized = {{0, 0.f}, {t, 1.5f}, {static_cast<int32_t>(V - 1), -0.75f},
                                                              {static_cast<int32_t>(V + 5), 3.f}};
    rows.add(0, 0, 1, 0, key);
    rows.add(0, 0, 1, 0, key, penalized, 1.3f);
    rows.add(1, 0, 1, 0, key + 1);
    rows.add(0.7f, 0, 1, 0, key + 2);
    rows.add(1, 1, 1, 0, key + 3);
    rows.add(1.2f, 40, 1, 0, key + 4);
    rows.add(1, static_cast<int32_t>(V + 3), 1, 0, key + 5);
    rows.add(1, 0, 0.9f, 0, key + 6);
    rows.add(1, 0, 1e-6f, 0, key + 7);
    rows.add(1, 0, 1, 0.05f, key + 8);
    rows.add(0.6f, 20, 0.95f, 0, key + 9);
    rows.add(0.8f, 50, 0.8f, 0.02f, key + 10, penalized, 1.1f);
    rows.add(1, 0, 0.5f, 0, key + 11, penalized, 0.9f);
    return rows;
  };
  for (int64_t V : {1, 7, 1000, 4097}) {
    for (uint64_t key : {uint64_t{1}, uint64_t{0x9e3779b97f4a7c15}}) {
      const SamplingRows rows = every_rule(V, key);
      add("sample_rows of " + shape_text({static_cast<int64_t>(rows.rows.size()), V}) + " key " + std::to_string(key),
          random_floats({static_cast<int64_t>(rows.rows.size()), V}, rng, 4.f), rows);
    }
  }
  SamplingRows wide;
  wide.add(0.6f, 20, 0.95f, 0, 5);
  wide.add(1, 0, 0.9f, 0, 6);
  wide.add(0.7f, 0, 1, 0.1f, 7, {{17, 0.4f}, {151935, 1.f}}, 1.2f);
  add("sample_rows of Qwen3's vocabulary", random_floats({3, 151936}, rng, 8.f), wide);

  Tensor ties = Tensor::cpu({8, 300}, DType::float32);
  std::uniform_int_distribution<int> small(-3, 3);
  for (int64_t i = 0; i < ties.numel(); ++i) ties.data<float>()[i] = static_cast<float>(small(rng));
  SamplingRows tied;
  for (uint64_t key = 0; key < 2; ++key) {
    tied.add(0, 0, 1, 0, key);
    tied.add(1, 30, 1, 0, key);
    tied.add(1, 0, 0.3f, 0, key);
    tied.add(1, 10, 0.5f, 0.2f, key);
  }
  add("sample_rows of repeated values", ties, tied);

  const float inf = std::numeric_limits<float>::infinity();
  Tensor odd = random_floats({5, 64}, rng);
  for (int64_t i = 0; i < 64; ++i) odd.data<float>()[i] = i == 37 ? 2.f : -inf;  // one token left
  odd.data<float>()[64 + 5] = std::numeric_limits<float>::quiet_NaN();
  odd.data<float>()[2 * 64 + 9] = inf;
  for (int64_t i = 0; i < 64; ++i) odd.data<float>()[3 * 64 + i] = -inf;
  odd.data<float>()[4 * 64 + 3] = -inf;  // a -inf among finite values is fine
  SamplingRows odd_rows;
  odd_rows.add(1, 5, 0.5f, 0.1f, 11);
  odd_rows.add(1, 0, 1, 0, 12);
  odd_rows.add(0, 0, 1, 0, 13);
  odd_rows.add(1, 3, 1, 0, 14);
  odd_rows.add(1, 0, 0.9f, 0, 15, {{3, 1.f}}, 2.f);
  add("sample_rows of one finite value, NaN, +inf, all -inf", odd, odd_rows);

  // Rows a device may split over several blocks (past a few thousand tokens, top-k up to 64): values of k /
  // 8, exact in every dtype, so that runs of equal values straddle the cuts of the slices and of the row; a
  // row of one value (more ties than a slice keeps); a NaN and a +inf far into rows.
  constexpr int64_t kWideV = 20000;
  Tensor steps = Tensor::cpu({9, kWideV}, DType::float32);
  std::uniform_int_distribution<int> eighths(-200, 200);
  for (int64_t i = 0; i < steps.numel(); ++i) steps.data<float>()[i] = static_cast<float>(eighths(rng)) / 8;
  for (int64_t i = 0; i < kWideV; ++i) steps.data<float>()[6 * kWideV + i] = 0.5f;
  steps.data<float>()[7 * kWideV + 15000] = std::numeric_limits<float>::quiet_NaN();
  steps.data<float>()[8 * kWideV + 9000] = inf;
  SamplingRows split;
  split.add(0.6f, 20, 0.95f, 0, 21);
  split.add(1, 64, 1, 0.05f, 22);
  split.add(0.8f, 5, 0.9f, 0, 23, {{0, 1.f}, {12345, -0.5f}, {19999, 2.f}, {25000, 1.f}}, 1.3f);
  split.add(1, 1, 1, 0, 24);
  split.add(1, 65, 0.8f, 0, 25);
  split.add(0, 20, 1, 0, 26);
  split.add(1, 10, 1, 0, 27);
  split.add(1, 20, 0.9f, 0, 28);
  split.add(1, 20, 0.9f, 0, 29);
  add("sample_rows of 20,000 eighths, a flat row, NaN and +inf", steps, split);
  // The same rows one at a time: a batch of one row splits on any device of two compute units or more.
  for (const int64_t r : {0, 2, 6, 7}) {
    Tensor one = Tensor::cpu({1, kWideV}, DType::float32);
    std::copy_n(steps.data<float>() + r * kWideV, kWideV, one.data<float>());
    SamplingRows alone;
    alone.rows = {split.rows[static_cast<size_t>(r)]};
    alone.penalties = split.penalties;
    add("sample_rows of one row of 20,000 (row " + std::to_string(r) + " above)", one, alone);
  }
  return cases;
}

// The cases of every op, by op name.
const std::map<std::string_view, std::vector<Case>>& all_cases() {
  static const auto cases = [] {
    std::mt19937 rng(2026);
    std::map<std::string_view, std::vector<Case>> m;
    m[op::Embedding::name] = embedding_cases(rng);
    m[op::Linear::name] = linear_cases(rng);
    m[op::RmsNorm::name] = rms_norm_cases(rng);
    m[op::AddRmsNorm::name] = add_rms_norm_cases(rng);
    m[op::NormLinear::name] = norm_linear_cases(rng);
    m[op::Rope::name] = rope_cases(rng);
    m[op::SiluMul::name] = silu_mul_cases(rng);
    m[op::Add::name] = add_cases(rng);
    m[op::Cast::name] = cast_cases(rng);
    m[op::SplitColumns::name] = split_columns_cases(rng);
    m[op::GatherRows::name] = gather_rows_cases(rng);
    m[op::ArgmaxRows::name] = argmax_rows_cases(rng);
    m[op::KvCacheWrite::name] = kv_cache_write_cases(rng);
    m[op::QkvRopeCache::name] = qkv_rope_cache_cases(rng);
    m[op::QkvRope::name] = qkv_rope_cases(rng);
    m[op::QkvRopeBackward::name] = qkv_rope_backward_cases(rng);
    m[op::PagedAttention::name] = paged_attention_cases<op::PagedAttention>(rng);
    m[op::PagedAttentionLse::name] = paged_attention_cases<op::PagedAttentionLse>(rng);
    m[op::QkvAttention::name] = qkv_attention_cases(rng);
    m[op::ConcatColumns::name] = concat_columns_cases(rng);
    m[op::LinearBackward::name] = linear_backward_cases(rng);
    m[op::RmsNormBackward::name] = rms_norm_backward_cases(rng);
    m[op::SiluMulBackward::name] = silu_mul_backward_cases(rng);
    m[op::EmbeddingBackward::name] = embedding_backward_cases(rng);
    m[op::AttentionBackward::name] = attention_backward_cases(rng);
    m[op::CrossEntropy::name] = cross_entropy_cases(rng);
    m[op::SumSquares::name] = sum_squares_cases(rng);
    m[op::AdamW::name] = adamw_cases(rng);
    m[op::AddScaledColumns::name] = add_scaled_columns_cases(rng);
    m[op::LinearAdd::name] = linear_add_cases(rng);
    m[op::Dropout::name] = dropout_cases(rng);
    m[op::SampleRows::name] = sample_rows_cases(rng);
    return m;
  }();
  return cases;
}

// Runs one registered kernel (an Op's, by name) on a type-erased argument struct.
using KernelCall = std::function<bool(const void*)>;

template <typename Op>
KernelCall call_of(DeviceType device, DType dtype, const std::string& variant) {
  const Kernel<Op>* k = kernel_registry().find<Op>(device, dtype, variant);
  return [k](const void* args) {
    const Op& a = *static_cast<const Op*>(args);
    if (!k || (k->supports && !k->supports(a))) return false;
    k->run(a);
    return true;
  };
}

KernelCall kernel_call(std::string_view op, DeviceType device, DType dtype, const std::string& variant) {
  KernelCall call;
  op::for_each_op([&]<typename Op>() {
    if (Op::name == op) call = call_of<Op>(device, dtype, variant);
  });
  return call;
}

// The reference of an op: the CPU's float32 "reference" variant where it has one, else its default.
KernelCall reference_call(std::string_view op) {
  for (const KernelInfo& k : kernel_registry().list()) {
    if (k.op == op && k.device == DeviceType::cpu && k.dtype == DType::float32 && k.variant == "reference")
      return kernel_call(op, DeviceType::cpu, DType::float32, "reference");
  }
  return kernel_call(op, DeviceType::cpu, DType::float32, "");
}

std::optional<Device> device_of_kind(DeviceType type) {
  if (type == DeviceType::cpu) return Device{};
  if (type == DeviceType::xpu) return xpu::seam_test_device();
  Backend* b = find_backend(type);
  return b && b->device_count() > 0 ? std::optional(Device{type, 0}) : std::nullopt;
}

// max |got - want| over max |want|, with NaN in `got` where `want` has a number failing. Integer outputs
// (indices) must be equal.
void expect_close(const Tensor& got_device, const Tensor& want, double tol, const std::string& what) {
  if (got_device.dtype() == DType::int32) {
    const Tensor got = to_device(got_device, Device{});
    ASSERT_EQ(got.shape(), want.shape()) << what;
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_EQ(got.data<int32_t>()[i], want.data<int32_t>()[i]) << what << ": element " << i;
    return;
  }
  const Tensor got = as_floats(got_device);
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.data<float>()[i], w = want.data<float>()[i];
    if (std::isnan(w)) {
      ASSERT_TRUE(std::isnan(g)) << what << ": element " << i << " written where it must not be";
      continue;
    }
    ASSERT_FALSE(std::isnan(g)) << what << ": element " << i << " not written";
    diff = std::max(diff, std::fabs(g - w));
    scale = std::max(scale, std::fabs(w));
  }
  EXPECT_LE(diff, tol * std::max(scale, 1e-30)) << what << ": max error " << diff << " at scale " << scale;
}

std::string test_name(const KernelInfo& k) {
  return std::string(k.op.substr(0, k.op.find_last_not_of('_') + 1)) + "_" + std::string(device_type_name(k.device)) +
         "_" + std::string(dtype_name(k.dtype)) + "_" + k.variant;
}

// Why a variant for other hardware does not run on `device` at all (it would refuse every case), or empty: the
// Intel variants need their capability, oneDNN's linear an Intel GPU (onednn_matmul.h).
std::string refusal(const KernelInfo& k, Device device) {
#ifdef TFM_HAVE_XPU
  if (k.device != DeviceType::xpu) return {};
  const DeviceInfo info = find_backend(DeviceType::xpu)->info(device.index);
  if (k.variant == "intel_subgroup" && !info.xpu_capabilities->intel_subgroups)
    return device.str() + " has no Intel sub-groups";
  if (k.variant == "dpas" && !info.xpu_capabilities->dpas) return device.str() + " has no DPAS";
  if (k.variant == "onednn") return xpu::onednn_linear().refusal(device.index_or_zero());
#endif
  return {};
}

class Conformance : public testing::TestWithParam<KernelInfo> {};

TEST_P(Conformance, MatchesTheReferenceOnTheSameInputs) {
  const KernelInfo& k = GetParam();
  const std::optional<Device> device = device_of_kind(k.device);
  if (!device) GTEST_SKIP() << "no " << device_type_name(k.device) << " device here";
  if (const std::string why = refusal(k, *device); !why.empty()) GTEST_SKIP() << why;
  const auto cases = all_cases().find(k.op);
  ASSERT_NE(cases, all_cases().end()) << "op " << k.op << " has kernels but no test cases";
  const KernelCall kernel = kernel_call(k.op, k.device, k.dtype, k.variant);
  const KernelCall reference = reference_call(k.op);
  int ran = 0;
  for (const Case& c : cases->second) {
    const std::vector<Tensor> inputs = rounded(c.inputs, k.dtype);
    std::vector<Tensor> ref_inputs, want;
    for (const Tensor& t : inputs) ref_inputs.push_back(placed(t, DType::float32, Device{}));
    ASSERT_TRUE(c.run(ref_inputs, Device{}, DType::float32, reference, want)) << c.what << ": the reference refused";
    // Twice, from fresh copies of the inputs: a kernel that keeps state between launches (the arrival counters
    // of work split over blocks) must leave it as it found it.
    for (const char* launch : {"", " (again)"}) {
      std::vector<Tensor> dev_inputs, got;
      for (const Tensor& t : inputs) dev_inputs.push_back(placed(t, k.dtype, *device));
      if (!c.run(dev_inputs, *device, k.dtype, kernel, got)) break;  // a shape this variant does not take
      if (*launch == '\0') ++ran;
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        const Tensor expected = want[i].dtype() == DType::int32 ? want[i] : as_floats(want[i]);
        expect_close(got[i], expected, tolerance(k.dtype), c.what + launch + " output " + std::to_string(i));
      }
    }
  }
  EXPECT_GT(ran, 0) << "the kernel accepted none of the cases";
}

INSTANTIATE_TEST_SUITE_P(Registry, Conformance, testing::ValuesIn(kernel_registry().list()),
                         [](const testing::TestParamInfo<KernelInfo>& info) { return test_name(info.param); });

}  // namespace
}  // namespace tfm

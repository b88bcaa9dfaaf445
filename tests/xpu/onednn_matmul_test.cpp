// The oneDNN path of the xpu linear. On PoCL (or NVIDIA) oneDNN refuses the device, and the default linear
// and the "onednn" variant must still equal the CPU reference (tfm's own kernels serve); on an Intel GPU
// (TFM_XPU_PLATFORM=Intel) the same tests run oneDNN. What runs here of oneDNN's side: the shape and layout
// descriptions, checked on oneDNN's CPU engine, and the sub-buffers its memory objects are made over.
#include "tfm/backend/xpu/onednn_matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <unordered_map>
#include <vector>

#include "support/error_of.h"
#include "support/log_capture.h"
#include "support/random_tensor.h"
#include "test_platform.h"
#include "tfm/backend/xpu/buffer_view.h"
#include "tfm/backend/xpu/xpu_backend.h"
#include "tfm/core/floats.h"
#include "tfm/ops/ops.h"

namespace tfm::xpu {
namespace {

using test_support::error_of;
using test_support::LogCapture;
using test_support::random_tensor;

double tolerance(DType d) {  // of the result's largest magnitude, as the kernel conformance test
  return d == DType::float32 ? 2e-5 : d == DType::bfloat16 ? 1.5e-2 : 2e-3;
}

// A tensor of NaN: an element the kernel does not write shows.
Tensor poisoned(const Shape& shape, DType dtype, Device device) {
  Tensor nan = Tensor::cpu(shape, DType::float32);
  std::fill_n(nan.data<float>(), nan.numel(), std::numeric_limits<float>::quiet_NaN());
  Tensor stored = Tensor::cpu(shape, dtype);
  ops::cast(nan, stored);
  return to_device(stored, device);
}

// max |got - want| within tolerance(dtype) of max |want|, with no NaN in `got`.
void expect_close(const Tensor& got_anywhere, const Tensor& want, const std::string& what) {
  const Tensor got = to_device(got_anywhere, Device{});
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double diff = 0, scale = 0;
  visit_float(want.dtype(), [&]<typename T>() {
    for (int64_t i = 0; i < want.numel(); ++i) {
      const double g = to_float(got.data<T>()[i]), w = to_float(want.data<T>()[i]);
      ASSERT_FALSE(std::isnan(g)) << what << ": element " << i << " not written";
      diff = std::max(diff, std::fabs(g - w));
      scale = std::max(scale, std::fabs(w));
    }
  });
  EXPECT_LE(diff, tolerance(want.dtype()) * scale) << what << ": max error " << diff << " at scale " << scale;
}

// What oneDNN's GPU engine takes: a GPU of Intel's platform.
bool intel_gpu(const XpuDevice& d) {
  return platform_string(d.platform, CL_PLATFORM_VENDOR, "CL_PLATFORM_VENDOR").find("Intel") !=
             std::string::npos &&
         (device_value<cl_device_type>(d.id, CL_DEVICE_TYPE, "CL_DEVICE_TYPE") & CL_DEVICE_TYPE_GPU) != 0;
}

class OneDnnXpuTest : public OnTestDevice<> {};

TEST_F(OneDnnXpuTest, RefusesAnythingButAnIntelGpuWithAReasonLoggedOnce) {
  LogCapture log(logging::Level::info);
  OneDnnLinear linear(xpu_backend());  // a fresh one asks oneDNN again
  const std::string why = linear.refusal(0);
  EXPECT_EQ(linear.refusal(0), why);
  if (intel_gpu(xpu_backend().device(0))) {
    EXPECT_EQ(why, "");
    EXPECT_TRUE(log.at(logging::Level::info).empty());
    return;
  }
  EXPECT_NE(why.find("does not take xpu:0 (" + xpu_backend().info(0).name + " on platform '"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("could not create an engine"), std::string::npos) << why;
  EXPECT_EQ(log.at(logging::Level::info),
            std::vector<std::string>{why + ". tfm's own kernels run the linears there"});

  std::mt19937 rng(1);
  const Tensor x = to_device(random_tensor({20, 16}, DType::float32, rng), device_);
  const Tensor w = to_device(random_tensor({12, 16}, DType::float32, rng), device_);
  Tensor y = empty({20, 12}, DType::float32, device_);
  const Tensor none;
  EXPECT_FALSE(linear.accepts(op::Linear{x, w, none, y}));
  EXPECT_EQ(error_of([&] { linear.run(op::Linear{x, w, none, y}); }), why);
  EXPECT_EQ(log.at(logging::Level::info).size(), 1u);
}

class OneDnnLinearTest : public OneDnnXpuTest, public testing::WithParamInterface<DType> {};

// The default linear (oneDNN past 8 rows where it takes the device) and the "onednn" variant (the default
// serves what it refuses) against the CPU's reference, with and without bias, a decode step's rows and a
// prefill's; sizes that are multiples of no tile.
TEST_P(OneDnnLinearTest, DefaultAndOneDnnVariantEqualTheCpuReference) {
  const DType dtype = GetParam();
  std::mt19937 rng(11);
  for (int64_t M : {3, 37}) {
    for (bool with_bias : {false, true}) {
      const int64_t K = 70, N = 45;
      const Tensor x = random_tensor({M, K}, dtype, rng), w = random_tensor({N, K}, dtype, rng);
      const Tensor bias = with_bias ? random_tensor({N}, dtype, rng) : Tensor();
      Tensor want = Tensor::cpu({M, N}, dtype);
      ops::linear(x, w, bias, want, "reference");
      const Tensor x_dev = to_device(x, device_), w_dev = to_device(w, device_);
      const Tensor bias_dev = with_bias ? to_device(bias, device_) : Tensor();
      for (const char* variant : {"", "onednn"}) {
        Tensor y = poisoned({M, N}, dtype, device_);
        ops::linear(x_dev, w_dev, bias_dev, y, variant);
        expect_close(
            y, want,
            std::string("variant '") + variant + "', M " + std::to_string(M) + (with_bias ? ", bias" : ""));
      }
    }
  }
}

// A view that starts on the device's sub-buffer alignment reads back as the tensor's elements; one that does
// not has no view, and asking for one is an error that says why.
TEST_P(OneDnnLinearTest, SubBuffersViewExactlyATensorsElements) {
  const DType dtype = GetParam();
  const XpuDevice& device = xpu_backend().device(0);
  const size_t alignment = sub_buffer_alignment(device.id);
  ASSERT_GT(alignment, 0u);
  const int64_t row = 5;  // elements: 10 or 20 bytes, so most rows start off the alignment
  const size_t row_bytes = row * dtype_size(dtype);
  const int64_t aligned_row = static_cast<int64_t>(alignment / std::gcd(alignment, row_bytes));
  std::mt19937 rng(5);
  const Tensor host = random_tensor({aligned_row + 7, row}, dtype, rng);
  const Tensor whole = to_device(host, device_);

  const Tensor aligned = whole.narrow(aligned_row, 6);
  ASSERT_TRUE(has_buffer_view(aligned, alignment));
  const ClBuffer view = buffer_view(aligned, alignment, device.where);
  size_t view_bytes = 0;
  cl_check(clGetMemObjectInfo(view.get(), CL_MEM_SIZE, sizeof view_bytes, &view_bytes, nullptr), "size");
  EXPECT_EQ(view_bytes, aligned.nbytes());
  std::vector<unsigned char> read(aligned.nbytes());
  cl_check(clEnqueueReadBuffer(device.queue.get(), view.get(), CL_TRUE, 0, read.size(), read.data(), 0,
                               nullptr, nullptr),
           "clEnqueueReadBuffer");
  EXPECT_EQ(std::memcmp(read.data(), host.narrow(aligned_row, 6).raw(), read.size()), 0);

  EXPECT_TRUE(has_buffer_view(whole, alignment));
  const Tensor off = whole.narrow(1, 6);
  EXPECT_FALSE(has_buffer_view(off, alignment));
  EXPECT_NE(error_of([&] { buffer_view(off, alignment, "xpu:0"); })
                .find("xpu:0: tensor " + off.str() + " at byte " + std::to_string(row_bytes) +
                      " of its buffer has no sub-buffer: the device places them at multiples of " +
                      std::to_string(alignment) + " bytes"),
            std::string::npos);
}

// Linear outputs and inputs that are views at an offset: through sub-buffers where aligned, else (and on
// refused devices) through tfm's kernels; the rows around the output view stay untouched.
TEST_P(OneDnnLinearTest, ViewsAtOffsetsEqualTheCpuReference) {
  const DType dtype = GetParam();
  const size_t alignment = sub_buffer_alignment(xpu_backend().device(0).id);
  const int64_t K = 24, N = 40, M = 17;
  std::mt19937 rng(9);
  const Tensor x_all = random_tensor({M + 40, K}, dtype, rng), w = random_tensor({N, K}, dtype, rng),
               bias = random_tensor({N}, dtype, rng);
  const Tensor x_dev = to_device(x_all, device_), w_dev = to_device(w, device_),
               bias_dev = to_device(bias, device_);
  for (int64_t first :
       {int64_t{1}, static_cast<int64_t>(alignment / std::gcd(alignment, K * dtype_size(dtype)))}) {
    Tensor want = Tensor::cpu({M, N}, dtype);
    ops::linear(x_all.narrow(first, M), w, bias, want, "reference");
    Tensor y_all = poisoned({M + 2 * first, N}, dtype, device_);
    Tensor y = y_all.narrow(first, M);
    ops::linear(x_dev.narrow(first, M), w_dev, bias_dev, y, "onednn");
    expect_close(y, want, "rows from " + std::to_string(first));
    const Tensor around = to_device(y_all, Device{});
    visit_float(dtype, [&]<typename T>() {
      for (int64_t i = 0; i < first * N; ++i) {
        EXPECT_TRUE(std::isnan(to_float(around.data<T>()[i])))
            << "element " << i << " before the view written";
        EXPECT_TRUE(std::isnan(to_float(around.data<T>()[(first + M) * N + i])))
            << "element after the view written";
      }
    });
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, OneDnnLinearTest, testing::ValuesIn(kComputeDTypes),
                         [](const testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

// The descriptions and the matmul the xpu path builds, on oneDNN's CPU engine, against the CPU's reference:
// x row-major, w (N, K) read transposed, the bias added inside. float32 always; the 16-bit dtypes where this
// CPU's oneDNN has them (AVX-512 and newer).
TEST(OneDnnDescs, MatmulOnTheCpuEngineEqualsTheReference) {
  const dnnl::engine cpu(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(cpu);
  std::mt19937 rng(3);
  for (DType dtype : kComputeDTypes) {
    for (bool with_bias : {false, true}) {
      const int64_t M = 13, K = 33, N = 21;
      const std::optional<dnnl::matmul> matmul = linear_matmul(cpu, LinearDescs(dtype, M, K, N), with_bias);
      if (!matmul) {
        EXPECT_NE(dtype, DType::float32) << "oneDNN has a float32 matmul on every CPU";
        continue;
      }
      const Tensor x = random_tensor({M, K}, dtype, rng), w = random_tensor({N, K}, dtype, rng);
      const Tensor bias = with_bias ? random_tensor({N}, dtype, rng) : Tensor();
      Tensor want = Tensor::cpu({M, N}, dtype), y = poisoned({M, N}, dtype, Device{});
      ops::linear(x, w, bias, want, "reference");
      const LinearDescs descs(dtype, M, K, N);
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(descs.x, cpu, x.raw())},
                                                 {DNNL_ARG_WEIGHTS, dnnl::memory(descs.w, cpu, w.raw())},
                                                 {DNNL_ARG_DST, dnnl::memory(descs.y, cpu, y.raw())}};
      if (with_bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(descs.bias, cpu, bias.raw()));
      matmul->execute(stream, args);
      stream.wait();
      expect_close(y, want, std::string(dtype_name(dtype)) + (with_bias ? ", bias" : ""));
    }
  }
}

}  // namespace
}  // namespace tfm::xpu

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tfm/core/device.h"
#include "tfm/core/dtype.h"
#include "tfm/core/error.h"
#include "tfm/core/floats.h"
#include "tfm/core/tensor.h"

namespace tfm {
namespace {

TEST(Device, ParsesAndPrintsAsTorch) {
  EXPECT_EQ(Device::parse("cpu").str(), "cpu");
  EXPECT_EQ(Device::parse("cuda").str(), "cuda");
  EXPECT_EQ(Device::parse("cuda:1").str(), "cuda:1");
  EXPECT_EQ(Device::parse("xpu:0").index, 0);
  EXPECT_EQ(Device::parse("xpu:0").type, DeviceType::xpu);
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "xpu:1:2", "", "CPU"}) {
    EXPECT_THROW(Device::parse(bad), Error) << bad;
  }
}

TEST(DType, NamesRoundTrip) {
  for (DType t :
       {DType::float32, DType::bfloat16, DType::float16, DType::int64, DType::bool_, DType::uint8}) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
    DType back;
    ASSERT_TRUE(parse_safetensors_dtype(safetensors_dtype_name(t), &back));
    EXPECT_EQ(back, t);
  }
  EXPECT_EQ(parse_dtype("torch.bfloat16"), DType::bfloat16);
  EXPECT_EQ(parse_dtype("half"), DType::float16);
  EXPECT_THROW(parse_dtype("bf17"), Error);
}

TEST(DType, HalfConversionsRoundToNearestEven) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-70000.f, 70000.f);
  for (int i = 0; i < 10000; ++i) {
    const float f = dist(rng) * std::pow(2.f, static_cast<float>(static_cast<int>(rng() % 40) - 30));
    const float b = bf16_to_float(float_to_bf16(f));
    EXPECT_LE(std::fabs(b - f), std::ldexp(std::fabs(f), -8)) << f;
    if (std::fabs(f) < 65504.f) {
      const float h = fp16_to_float(float_to_fp16(f));
      EXPECT_LE(std::fabs(h - f), std::max(std::ldexp(std::fabs(f), -11), std::ldexp(1.f, -25))) << f;
    }
  }
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16(65520.f), 0x7c00);  // rounds up to inf, as torch does
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

// Every float16 bit pattern against the definition (sign, 5-bit exponent, 10-bit mantissa), and back.
TEST(DType, EveryHalfConvertsExactlyAndBack) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const int exponent = static_cast<int>((h >> 10) & 0x1f), mantissa = static_cast<int>(h & 0x3ff);
    float want = exponent == 0    ? std::ldexp(static_cast<float>(mantissa), -24)
                 : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                  : std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
    if (h & 0x8000) want = -want;
    const float got = fp16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
      continue;
    }
    ASSERT_EQ(float_to_bits(got), float_to_bits(want)) << h;
    ASSERT_EQ(float_to_fp16(got), h) << h;
  }
}

// A float between two neighbouring halves goes to the nearer one, and a tie to the one with an even mantissa.
TEST(DType, FloatToHalfRoundsToNearestEven) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const uint16_t low = static_cast<uint16_t>(rng() % 0x7bff);  // a finite half below the largest
    const float a = fp16_to_float(low), b = fp16_to_float(static_cast<uint16_t>(low + 1));
    const float t = std::uniform_real_distribution<float>(0.f, 1.f)(rng);
    const float f = (i % 8 == 0) ? a + (b - a) / 2 : a + (b - a) * t;  // every eighth a tie
    const uint16_t got = float_to_fp16(f);
    const double da = std::fabs(double(f) - a), db = std::fabs(double(f) - b);
    const uint16_t want = da < db ? low : db < da ? static_cast<uint16_t>(low + 1) : (low % 2 ? low + 1 : low);
    ASSERT_EQ(got, want) << f;
    ASSERT_EQ(float_to_fp16(-f), want | 0x8000) << -f;
  }
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::cpu({4, 3}, DType::float32);
  for (int i = 0; i < 12; ++i) t.data<float>()[i] = static_cast<float>(i);
  Tensor row = t[2];
  EXPECT_EQ(row.shape(), Shape({3}));
  EXPECT_EQ(row.data<float>()[0], 6.f);
  Tensor mid = t.narrow(1, 2).reshape({6});
  EXPECT_EQ(mid.data<float>()[5], 8.f);
  EXPECT_THROW(t.reshape({5}), Error);
  EXPECT_THROW(t.narrow(3, 2), Error);
  EXPECT_EQ(t.str(), "float32[4, 3] on cpu");
}

}  // namespace
}  // namespace tfm

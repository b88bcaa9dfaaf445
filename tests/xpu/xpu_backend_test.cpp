// The xpu backend on a real OpenCL device: PoCL (CPU) by default, which CI installs; another platform with
// TFM_XPU_PLATFORM (e.g. "NVIDIA CUDA" on the GPU machine, "Intel" on an Intel GPU). Tests skip when the
// platform has no device.
#include "tfm/backend/xpu/xpu_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

#include "test_platform.h"
#include "tfm/core/error.h"

namespace tfm::xpu {
namespace {

SelectionEnv test_env(std::optional<std::string> mask = std::nullopt) {
  SelectionEnv env;
  env.platform = test_platform();
  env.affinity_mask = std::move(mask);
  return env;
}

XpuBackend& backend() {
  static XpuBackend b(test_env());
  return b;
}

#define SKIP_WITHOUT_DEVICE()        \
  if (backend().device_count() == 0) \
  GTEST_SKIP() << "no OpenCL device on platform '" << test_platform() << "'"

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<unsigned char> random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> out(n);
  for (auto& b : out) b = static_cast<unsigned char>(rng());
  return out;
}

TEST(ClStatus, NamesStatusesAndCalls) {
  EXPECT_EQ(cl_status_name(CL_OUT_OF_RESOURCES), "CL_OUT_OF_RESOURCES");
  EXPECT_EQ(cl_status_name(CL_INVALID_BUFFER_SIZE), "CL_INVALID_BUFFER_SIZE");
  EXPECT_EQ(cl_status_name(-12345), "CL status -12345");
  EXPECT_NO_THROW(cl_check(CL_SUCCESS, "clFinish"));
  EXPECT_EQ(message_of([] { cl_check(CL_OUT_OF_RESOURCES, "clFinish", "xpu:1"); }),
            "xpu:1: clFinish failed with CL_OUT_OF_RESOURCES (-5)");
}

TEST(XpuDiscovery, FindsTheTestPlatformsDevicesWithTheirInfo) {
  SKIP_WITHOUT_DEVICE();
  for (int i = 0; i < backend().device_count(); ++i) {
    const XpuDevice& d = backend().device(i);
    const DeviceInfo info = backend().info(i);
    EXPECT_EQ(info.device, (Device{DeviceType::xpu, i}));
    EXPECT_EQ(info.name, device_string(d.id, CL_DEVICE_NAME, "CL_DEVICE_NAME"));
    EXPECT_EQ(info.total_memory, device_value<cl_ulong>(d.id, CL_DEVICE_GLOBAL_MEM_SIZE, "size"));
    EXPECT_GT(info.free_memory, 0u);
    EXPECT_LE(info.free_memory, info.total_memory);
    EXPECT_EQ(info.driver_version.rfind("OpenCL ", 0), 0u) << info.driver_version;
    EXPECT_NE(info.driver_version.find(device_string(d.id, CL_DRIVER_VERSION, "driver")), std::string::npos);
    EXPECT_NE(platform_string(d.platform, CL_PLATFORM_NAME, "name").find(test_platform()), std::string::npos);
  }
  EXPECT_THROW(backend().device(backend().device_count()), Error);
  EXPECT_THROW(backend().device(-1), Error);
}

TEST(XpuDiscovery, AffinityMaskSelectsFromTheOrderedList) {
  SKIP_WITHOUT_DEVICE();
  const int n = backend().device_count();
  XpuBackend last(test_env(std::to_string(n - 1)));
  ASSERT_EQ(last.device_count(), 1);
  EXPECT_EQ(last.device(0).id, backend().device(n - 1).id);
  EXPECT_EQ(last.info(0).device, (Device{DeviceType::xpu, 0}));
  XpuBackend none(test_env(std::to_string(n)));
  EXPECT_EQ(none.device_count(), 0);
  EXPECT_EQ(none.why_no_devices(), "ZE_AFFINITY_MASK '" + std::to_string(n) + "' selects none of the " +
                                       std::to_string(n) + " devices");
}

// A platform asked for and absent (as "Intel" is on a machine with PoCL only): the error of a request for a
// device says so and lists the platforms there are.
TEST(XpuDiscovery, AnAbsentPlatformIsNamedWithThoseInstalled) {
  SKIP_WITHOUT_DEVICE();
  for (const std::string wanted : {"Intel", "No Such Platform"}) {
    SelectionEnv env;
    env.platform = wanted;
    XpuBackend absent(env);
    if (absent.device_count() > 0) continue;  // an Intel GPU is present
    const std::string why = absent.why_no_devices();
    EXPECT_EQ(why.rfind("no OpenCL platform named like TFM_XPU_PLATFORM '" + wanted + "' among ", 0), 0u)
        << why;
    EXPECT_NE(why.find("'" + test_platform()), std::string::npos) << why;
    EXPECT_EQ(message_of([&] { absent.device(0); }), "xpu:0 does not exist; there are 0 xpu devices: " + why);
  }
  EXPECT_EQ(backend().why_no_devices(), "");
}

// Without TFM_XPU_PLATFORM only Intel's platform counts; a machine without it hears which platforms it has.
TEST(XpuDiscovery, WithoutAnIntelPlatformTheErrorListsThePlatforms) {
  SKIP_WITHOUT_DEVICE();
  XpuBackend intel_only(SelectionEnv{});
  if (intel_only.device_count() > 0) GTEST_SKIP() << "an Intel GPU is present";
  const std::string why = intel_only.why_no_devices();
  if (why == "the Intel OpenCL platform has no GPU") return;  // Intel's driver installed, no GPU
  EXPECT_TRUE(why.starts_with("no Intel OpenCL platform among '")) << why;
  EXPECT_NE(why.find("'" + test_platform()), std::string::npos) << why;
  EXPECT_TRUE(
      why.ends_with(": Intel GPUs need intel-opencl-icd, and TFM_XPU_PLATFORM chooses another platform"))
      << why;
}

TEST(XpuDiscovery, InvalidAffinityMaskIsAnErrorEveryTime) {
  XpuBackend bad(test_env("0-1"));
  const std::string message = message_of([&] { bad.device_count(); });
  EXPECT_NE(message.find("ZE_AFFINITY_MASK '0-1'"), std::string::npos) << message;
  EXPECT_THROW(bad.device_count(), Error);
}

TEST(XpuDiscovery, DiscoveryRestoresTheAffinityMaskVariable) {
  ASSERT_EQ(setenv("ZE_AFFINITY_MASK", "0", 1), 0);
  XpuBackend b(test_env());
  b.device_count();
  const char* after = std::getenv("ZE_AFFINITY_MASK");
  ASSERT_NE(after, nullptr);
  EXPECT_STREQ(after, "0");
  unsetenv("ZE_AFFINITY_MASK");
}

TEST(XpuMemory, CopiesRoundTripThroughTheDevice) {
  SKIP_WITHOUT_DEVICE();
  for (size_t bytes : {size_t{1}, size_t{3}, size_t{4096 + 7}, size_t{1} << 20}) {
    const auto in = random_bytes(bytes, static_cast<unsigned>(bytes));
    std::vector<unsigned char> out(bytes, 0xAB);
    void* a = backend().allocate(0, bytes);
    void* b = backend().allocate(0, bytes);
    backend().copy_from_host(0, a, in.data(), bytes);
    backend().copy_on_device(0, b, a, bytes);
    backend().copy_from_host(0, a, out.data(), bytes);  // overwrite the source: b must hold its own copy
    backend().copy_to_host(0, out.data(), b, bytes);
    backend().synchronize(0);
    EXPECT_EQ(out, in) << bytes << " bytes";
    backend().deallocate(0, a);
    backend().deallocate(0, b);
  }
}

TEST(XpuMemory, ZeroBytesAllocateADistinctHandleAndCopyNothing) {
  SKIP_WITHOUT_DEVICE();
  void* a = backend().allocate(0, 0);
  void* b = backend().allocate(0, 0);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, b);
  backend().copy_from_host(0, a, nullptr, 0);
  backend().copy_on_device(0, b, a, 0);
  backend().copy_to_host(0, nullptr, b, 0);
  backend().deallocate(0, a);
  backend().deallocate(0, b);
}

// One byte past the device's largest buffer, and far past its memory: the size, the device and its limit.
TEST(XpuMemory, BuffersPastTheDevicesLimitAreErrorsNamingIt) {
  SKIP_WITHOUT_DEVICE();
  const XpuDevice& d = backend().device(0);
  ASSERT_GT(d.max_allocation, 0u);
  for (const size_t bytes : {d.max_allocation + 1, size_t{1} << 62}) {
    EXPECT_EQ(message_of([&] { backend().allocate(0, bytes); }),
              "xpu:0: cannot allocate " + std::to_string(bytes) + " bytes: " + d.info.name +
                  " holds at most " + std::to_string(d.max_allocation) +
                  " bytes in one buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE)");
  }
}

TEST(XpuMemory, FailedCallsNameTheCallAndStatus) {
  SKIP_WITHOUT_DEVICE();
  // A source past the buffer's end, which every driver must refuse (NVIDIA's lets an overlapping copy of a
  // buffer onto itself through, so that is no test of the message).
  void* a = backend().allocate(0, 16);
  const std::string past_end = message_of([&] { backend().copy_on_device(0, a, DeviceSpan(a, 1 << 20), 16); });
  EXPECT_NE(past_end.find("xpu:0: clEnqueueCopyBuffer failed with CL_INVALID_VALUE (-30)"), std::string::npos)
      << past_end;
  backend().deallocate(0, a);
}

TEST(XpuMemory, TensorsMoveThroughTheSeam) {
  SKIP_WITHOUT_DEVICE();
  // The process-wide backend reads the environment once; point it at the test platform before its first use.
  ASSERT_EQ(setenv("TFM_XPU_PLATFORM", test_platform().c_str(), 0), 0);
  ASSERT_NE(find_backend(DeviceType::xpu), nullptr);
  ASSERT_GT(find_backend(DeviceType::xpu)->device_count(), 0);
  EXPECT_EQ(resolve_device("xpu"), (Device{DeviceType::xpu, 0}));
  bool listed = false;
  for (const DeviceInfo& d : list_devices()) listed |= d.device == Device{DeviceType::xpu, 0};
  EXPECT_TRUE(listed);

  Tensor host = Tensor::cpu({3, 5}, DType::float32);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < host.numel(); ++i) host.data<float>()[i] = dist(rng);
  const Tensor on_xpu = to_device(host, Device{DeviceType::xpu, 0});
  EXPECT_EQ(on_xpu.device(), (Device{DeviceType::xpu, 0}));
  const Tensor copy = to_device(on_xpu, Device{DeviceType::xpu, 0});
  const Tensor back = to_device(copy, Device{});
  ASSERT_EQ(back.shape(), host.shape());
  EXPECT_EQ(std::memcmp(back.raw(), host.raw(), host.nbytes()), 0);
  // A view that starts inside its buffer comes back from its own offset.
  const Tensor row = to_device(on_xpu[2], Device{});
  EXPECT_EQ(std::memcmp(row.raw(), host[2].raw(), host[2].nbytes()), 0);
}

constexpr const char* kAxpy = R"(
__kernel void axpy_f32(const float a, __global const float* x, __global float* y, const uint n) {
  const size_t i = get_global_id(0);
  if (i < n) y[i] = fma(a, x[i], y[i]);
}
)";

TEST(XpuPrograms, AxpyKernelMatchesFusedMultiplyAdd) {
  SKIP_WITHOUT_DEVICE();
  XpuDevice& d = backend().device(0);
  const cl_uint n = 1000;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist;
  std::vector<float> x(n), y(n), out(n, std::nanf(""));
  for (cl_uint i = 0; i < n; ++i) {
    x[i] = dist(rng);
    y[i] = dist(rng);
  }
  const float a = dist(rng);
  const size_t bytes = n * sizeof(float);
  void* xb = backend().allocate(0, bytes);
  void* yb = backend().allocate(0, bytes);
  backend().copy_from_host(0, xb, x.data(), bytes);
  backend().copy_from_host(0, yb, y.data(), bytes);

  const cl_program program = d.programs.get("axpy", kAxpy, "-cl-std=CL1.2");
  cl_int status = CL_SUCCESS;
  ClKernel kernel(clCreateKernel(program, "axpy_f32", &status));
  cl_check(status, "clCreateKernel");
  cl_mem x_mem = static_cast<cl_mem>(xb), y_mem = static_cast<cl_mem>(yb);
  cl_check(clSetKernelArg(kernel.get(), 0, sizeof(a), &a), "clSetKernelArg");
  cl_check(clSetKernelArg(kernel.get(), 1, sizeof(cl_mem), &x_mem), "clSetKernelArg");
  cl_check(clSetKernelArg(kernel.get(), 2, sizeof(cl_mem), &y_mem), "clSetKernelArg");
  cl_check(clSetKernelArg(kernel.get(), 3, sizeof(n), &n), "clSetKernelArg");
  const size_t global = n;
  cl_check(
      clEnqueueNDRangeKernel(d.queue.get(), kernel.get(), 1, nullptr, &global, nullptr, 0, nullptr, nullptr),
      "clEnqueueNDRangeKernel");
  backend().copy_to_host(0, out.data(), yb, bytes);
  for (cl_uint i = 0; i < n; ++i) ASSERT_EQ(out[i], std::fma(a, x[i], y[i])) << "element " << i;
  backend().deallocate(0, xb);
  backend().deallocate(0, yb);
}

TEST(XpuPrograms, CachedPerSourceAndOptions) {
  SKIP_WITHOUT_DEVICE();
  ProgramCache& cache = backend().device(0).programs;
  const cl_program first = cache.get("axpy", kAxpy, "");
  EXPECT_EQ(cache.get("axpy again", kAxpy, ""), first);
  const cl_program defined = cache.get("axpy", kAxpy, "-DUNUSED=1");
  EXPECT_NE(defined, first);
  EXPECT_EQ(cache.get("axpy", kAxpy, "-DUNUSED=1"), defined);
  EXPECT_NE(cache.get("axpy", std::string(kAxpy) + "\n", ""), first);
}

TEST(XpuPrograms, BuildFailureCarriesTheBuildLog) {
  SKIP_WITHOUT_DEVICE();
  ProgramCache& cache = backend().device(0).programs;
  const std::string broken = "__kernel void broken(__global float* y) { y[0] = undeclared_thing; }\n";
  const std::string message = message_of([&] { cache.get("broken", broken, "-DWHY=1"); });
  EXPECT_NE(message.find("xpu:0: program 'broken': clBuildProgram with options '-DWHY=1' failed with "
                         "CL_BUILD_PROGRAM_FAILURE"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("undeclared_thing"), std::string::npos) << message;  // from the compiler's log
  // Not cached: the same request fails again rather than returning a broken program.
  EXPECT_THROW(cache.get("broken", broken, "-DWHY=1"), Error);
}

}  // namespace
}  // namespace tfm::xpu

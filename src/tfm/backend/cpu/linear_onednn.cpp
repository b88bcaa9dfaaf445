// y = x @ w^T through oneDNN's matmul, which picks AVX2/AVX-512/AMX code for the machine at run time.
// Primitives are created once per shape and reused: creation costs far more than a decode step's small
// matmul.
#include <map>
#include <mutex>
#include <tuple>

#include <oneapi/dnnl/dnnl.hpp>

#include "tfm/backend/cpu/kernels.h"
#include "tfm/core/error.h"

namespace tfm::cpu {
namespace {

struct Engine {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mutex;
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, dnnl::matmul> primitives;
};

Engine& engine() {
  static Engine e;
  return e;
}

}  // namespace

void linear(const float* x, const float* w, const float* bias, int64_t M, int64_t K, int64_t N, float* y) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  Engine& e = engine();
  const dnnl::memory::desc src_md({M, K}, dt::f32, tag::ab);
  const dnnl::memory::desc wei_md({K, N}, dt::f32, tag::ba);  // w is (N, K) row-major: w^T viewed in place
  const dnnl::memory::desc dst_md({M, N}, dt::f32, tag::ab);
  const dnnl::memory::desc bias_md({1, N}, dt::f32, tag::ab);
  std::lock_guard<std::mutex> lock(e.mutex);
  const auto key = std::make_tuple(M, K, N, bias != nullptr);
  auto it = e.primitives.find(key);
  if (it == e.primitives.end()) {
    try {
      const dnnl::matmul::desc desc = bias ? dnnl::matmul::desc(src_md, wei_md, bias_md, dst_md)
                                           : dnnl::matmul::desc(src_md, wei_md, dst_md);
      it = e.primitives.emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(desc, e.engine))).first;
    } catch (const dnnl::error& err) {
      throw_error("oneDNN matmul (", M, "x", K, " by ", K, "x", N, "): ", err.what());
    }
  }
  dnnl::memory src(src_md, e.engine, const_cast<float*>(x));
  dnnl::memory wei(wei_md, e.engine, const_cast<float*>(w));
  dnnl::memory dst(dst_md, e.engine, y);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md, e.engine, const_cast<float*>(bias)));
  it->second.execute(e.stream, args);
  e.stream.wait();
}

}  // namespace tfm::cpu

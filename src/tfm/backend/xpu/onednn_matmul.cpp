#include "tfm/backend/xpu/onednn_matmul.h"

#include <map>
#include <mutex>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl_ocl.hpp>

#include "tfm/backend/xpu/buffer_view.h"
#include "tfm/backend/xpu/lru_cache.h"
#include "tfm/backend/xpu/xpu_backend.h"
#include "tfm/core/error.h"
#include "tfm/core/logging.h"

namespace tfm::xpu {
namespace {

// oneDNN 2.6 accumulates a float16 matmul in float16 (the default accumulation type of float16 inputs, which
// its GEMMs for older GPUs follow), except in its XMX GEMM of Xe-HPG and Xe-HPC, "jit:xe_hp:gemm", which
// accumulates in float32. bfloat16 and float32 accumulate in float32 everywhere.
bool accumulates_in_float32(const dnnl::matmul::primitive_desc& pd, dnnl::memory::data_type type) {
  return type != dnnl::memory::data_type::f16 ||
         std::string_view(pd.impl_info_str()).starts_with("jit:xe_hp:gemm");
}

// oneDNN's reference matmul and GEMM ("ocl:ref", its fallback where no optimised GEMM takes the dtype on the
// GPU) run one work-item per output column, looping over every row and all of K with no tiling: tfm's tiled
// kernel is the better choice there.
bool is_reference(const dnnl::matmul::primitive_desc& pd) {
  return std::string_view(pd.impl_info_str()).starts_with("ocl:ref");
}

// What oneDNN has of one device: an engine and a stream over tfm's own context and queue, or why it refused.
struct Served {
  dnnl::engine engine;
  dnnl::stream stream;
  size_t alignment = 0;  // of sub-buffers, in bytes
  std::string refusal;
};

// Asks oneDNN for an engine of `device` and logs a refusal; a device is asked once per OneDnnLinear.
Served serve(const XpuDevice& device) {
  Served s;
  try {
    s.engine = dnnl::ocl_interop::make_engine(device.id, device.context.get());
    s.stream = dnnl::ocl_interop::make_stream(s.engine, device.queue.get());
  } catch (const dnnl::error& e) {
    const dnnl::version_t* v = dnnl::version();
    s.refusal = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                std::to_string(v->patch) + " does not take " + device.where + " (" + device.info.name +
                " on platform '" + platform_string(device.platform, CL_PLATFORM_NAME, "CL_PLATFORM_NAME") +
                "'): " + e.what() + "; its GPU engine runs on Intel GPUs only";
    logging::log(logging::Level::info, s.refusal + ". tfm's own kernels run the linears there");
    return s;
  }
  s.alignment = sub_buffer_alignment(device.id);
  return s;
}

// The GEMMs oneDNN made (or could not make), by device, dtype, M, K, N and bias. A server's prefills come in
// many row counts, and each GEMM holds compiled kernels, so only the most recently used are kept.
using GemmKey = std::tuple<int, DType, int64_t, int64_t, int64_t, bool>;
constexpr size_t kCachedGemms = 256;

}  // namespace

std::optional<dnnl::matmul> linear_matmul(const dnnl::engine& engine, const LinearDescs& descs,
                                          bool with_bias) {
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(descs.matmul(with_bias), engine);
  } catch (const dnnl::error&) {  // no implementation for this dtype and shape on this engine
    return std::nullopt;
  }
  if (is_reference(pd) || !accumulates_in_float32(pd, descs.x.data_type())) return std::nullopt;
  try {
    return dnnl::matmul(pd);  // compiles its kernels
  } catch (const dnnl::error& e) {
    throw_error("oneDNN could not build its matmul ", pd.impl_info_str(), ": ", e.what());
  }
}

struct OneDnnLinear::State {
  explicit State(XpuBackend& backend) : backend(backend) {}

  const Served& served(int index) {
    auto it = devices.find(index);
    if (it == devices.end()) it = devices.emplace(index, serve(backend.device(index))).first;
    return it->second;
  }

  // The GEMM of `a`, or null when oneDNN does not take it.
  const dnnl::matmul* gemm(const op::Linear& a) {
    const int index = a.y.device().index_or_zero();
    const Served& s = served(index);
    if (!s.refusal.empty()) return nullptr;
    for (const Tensor* t : a.tensors()) {
      if (t->defined() && !has_buffer_view(*t, s.alignment)) return nullptr;  // also an empty one
    }
    const int64_t M = a.x.size(0), K = a.x.size(1), N = a.w.size(0);
    const bool with_bias = a.bias.defined();
    const std::optional<dnnl::matmul>& made = gemms.get({index, a.dtype(), M, K, N, with_bias}, [&] {
      return linear_matmul(s.engine, LinearDescs(a.dtype(), M, K, N), with_bias);
    });
    return made ? &*made : nullptr;
  }

  XpuBackend& backend;
  std::mutex mutex;
  std::map<int, Served> devices;
  LruCache<GemmKey, std::optional<dnnl::matmul>> gemms{kCachedGemms};
};

OneDnnLinear::OneDnnLinear(XpuBackend& backend) : state_(std::make_unique<State>(backend)) {}

OneDnnLinear::~OneDnnLinear() = default;

std::string OneDnnLinear::refusal(int index) {
  std::lock_guard lock(state_->mutex);
  return state_->served(index).refusal;
}

bool OneDnnLinear::accepts(const op::Linear& a) {
  std::lock_guard lock(state_->mutex);
  return state_->gemm(a) != nullptr;
}

void OneDnnLinear::run(const op::Linear& a) {
  std::lock_guard lock(state_->mutex);
  const int index = a.y.device().index_or_zero();
  const Served& s = state_->served(index);
  check(s.refusal.empty(), s.refusal);
  const dnnl::matmul* gemm = state_->gemm(a);
  const std::string& where = state_->backend.device(index).where;
  check(gemm != nullptr, where, ": oneDNN does not take the linear ", a.x.str(), " @ ", a.w.str(), "^T",
        a.bias.defined() ? " + bias" : "",
        ": it has no float32-accumulating GEMM for it, or a tensor starts off ",
        "the device's sub-buffer alignment of ", s.alignment, " bytes");
  const LinearDescs descs(a.dtype(), a.x.size(0), a.x.size(1), a.w.size(0));
  std::vector<ClBuffer> views;  // alive until the GEMM is enqueued; OpenCL keeps them for it after that
  views.reserve(4);
  std::unordered_map<int, dnnl::memory> args;
  try {
    const auto bind = [&](int arg, const Tensor& t, const dnnl::memory::desc& md) {
      views.push_back(buffer_view(t, s.alignment, where));
      args.emplace(arg, dnnl::ocl_interop::make_memory(md, s.engine, views.back().get()));
    };
    bind(DNNL_ARG_SRC, a.x, descs.x);
    bind(DNNL_ARG_WEIGHTS, a.w, descs.w);
    if (a.bias.defined()) bind(DNNL_ARG_BIAS, a.bias, descs.bias);
    bind(DNNL_ARG_DST, a.y, descs.y);
    gemm->execute(s.stream, args);  // enqueues on the device's queue, does not wait
  } catch (const dnnl::error& e) {
    throw_error(where, ": oneDNN's linear ", a.x.str(), " @ ", a.w.str(), "^T failed: ", e.what());
  }
}

OneDnnLinear& onednn_linear() {
  static OneDnnLinear* linear = new OneDnnLinear(xpu_backend());  // never destroyed, as the backend
  return *linear;
}

}  // namespace tfm::xpu

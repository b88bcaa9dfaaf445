#include "tfm/backend/xpu/xpu_op_kernels.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <mutex>
#include <string>

#include "tfm/backend/xpu/kernel_sources.h"
#include "tfm/backend/xpu/xpu_backend.h"
#include "tfm/core/error.h"

namespace tfm::xpu {
namespace {

// Work-group shapes; the programs get them as build options, so host and kernels agree.
constexpr size_t kPointGroup = 64;  // items along the columns of the pointwise kernels
constexpr size_t kRmsGroup = 128;   // rms_norm: items per row
constexpr size_t kTile = 64;        // linear_tiled: a 64x64 block of y per work-group,
constexpr size_t kTileK = 16;       // staged 16 columns of K at a time,
constexpr size_t kTileReg = 4;      // 4x4 outputs per item: 16x16 items
constexpr size_t kTileItems = kTile / kTileReg;
constexpr int64_t kRowsMax = 8;         // linear_rows serves x of up to 8 rows (decode steps),
constexpr size_t kRowsGroup = 64;       // with 64 items per output column
constexpr size_t kAttentionGroup = 64;  // items per (query row, head)

using ClBuffer = ClHandle<cl_mem, clReleaseMemObject>;

int32_t to_int(int64_t v, const char* what) {
  check(v >= 0 && v <= std::numeric_limits<int32_t>::max(), "xpu kernels: ", what, " ", v,
        " does not fit the kernels' 32-bit sizes");
  return static_cast<int32_t>(v);
}

size_t round_up(size_t n, size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// One kernel of a device, with its arguments set in declaration order; a Tensor is two arguments, its buffer
// (null for an undefined tensor) and its offset in elements.
class Launch {
 public:
  Launch(XpuDevice& device, cl_kernel kernel, const char* name)
      : device_(device), kernel_(kernel), name_(name) {}

  template <typename... A>
  Launch& args(const A&... a) {
    index_ = 0;
    (set(a), ...);
    return *this;
  }

  // Runs over `items` per dimension, rounded up to whole work-groups of `group`; nothing when there are none.
  void run(std::array<size_t, 2> items, std::array<size_t, 2> group) {
    if (items[0] == 0 || items[1] == 0) return;
    const std::array<size_t, 2> global{round_up(items[0], group[0]), round_up(items[1], group[1])};
    cl_check(clEnqueueNDRangeKernel(device_.queue.get(), kernel_, 2, nullptr, global.data(), group.data(), 0,
                                    nullptr, nullptr),
             std::string("clEnqueueNDRangeKernel(") + name_ + ")", device_.where);
  }

 private:
  template <typename T>
  void set_value(const T& value) {
    cl_check(clSetKernelArg(kernel_, index_, sizeof(T), &value),
             std::string("clSetKernelArg(") + name_ + ", " + std::to_string(index_) + ")", device_.where);
    ++index_;
  }
  void set(const Tensor& t) {
    set_value(t.defined() ? static_cast<cl_mem>(t.storage()->data()) : cl_mem{nullptr});
    set_value(static_cast<cl_long>(t.defined() ? t.offset() : 0));
  }
  void set(cl_mem m) { set_value(m); }
  void set(int32_t v) { set_value(static_cast<cl_int>(v)); }
  void set(int64_t v) { set_value(static_cast<cl_long>(v)); }
  void set(float v) { set_value(static_cast<cl_float>(v)); }

  XpuDevice& device_;
  cl_kernel kernel_;
  const char* name_;
  cl_uint index_ = 0;
};

struct Program {
  const char* name;
  const char* source;
  std::string options;
};

Program pointwise_program() {
  return {"pointwise", kernel_sources::pointwise, "-DRMS_GROUP=" + std::to_string(kRmsGroup)};
}

Program linear_program() {
  return {"linear", kernel_sources::linear,
          "-DTILE=" + std::to_string(kTile) + " -DTILE_K=" + std::to_string(kTileK) +
              " -DTILE_REG=" + std::to_string(kTileReg) + " -DROWS_MAX=" + std::to_string(kRowsMax) +
              " -DROWS_GROUP=" + std::to_string(kRowsGroup)};
}

Program attention_program(int64_t head_dim) {
  return {"attention", kernel_sources::attention,
          "-DHEAD_DIM=" + std::to_string(head_dim) + " -DATT_GROUP=" + std::to_string(kAttentionGroup)};
}

class XpuOpKernels final : public OpKernels {
 public:
  XpuOpKernels(XpuBackend& backend, size_t scores_bytes) : backend_(backend), scores_bytes_(scores_bytes) {}

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    std::lock_guard lock(mutex_);
    gather(table, ids, out);
  }

  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override {
    std::lock_guard lock(mutex_);
    gather(x, rows, out);
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) override {
    std::lock_guard lock(mutex_);
    const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
    const auto m = to_int(M, "rows"), k = to_int(K, "inner size"), n = to_int(N, "columns");
    if (M <= kRowsMax) {
      kernel(y, linear_program(), "linear_rows", kRowsGroup)
          .args(x, w, bias, y, m, k, n)
          .run({static_cast<size_t>(N) * kRowsGroup, 1}, {kRowsGroup, 1});
    } else {
      const auto tiles = [](int64_t size) {
        return (static_cast<size_t>(size) + kTile - 1) / kTile * kTileItems;
      };
      kernel(y, linear_program(), "linear_tiled", kTileItems * kTileItems)
          .args(x, w, bias, y, m, k, n)
          .run({tiles(N), tiles(M)}, {kTileItems, kTileItems});
    }
  }

  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    std::lock_guard lock(mutex_);
    const int64_t D = weight.size(0);
    kernel(out, pointwise_program(), "rms_norm", kRmsGroup)
        .args(x, weight, eps, out, to_int(D, "RMSNorm size"))
        .run({static_cast<size_t>(x.numel() / D) * kRmsGroup, 1}, {kRmsGroup, 1});
  }

  void rope_(Tensor& x, const Tensor& cos, const Tensor& sin) override {
    std::lock_guard lock(mutex_);
    const int64_t T = x.size(0), heads = x.size(1), half = cos.size(1) / 2;
    kernel(x, pointwise_program(), "rope", kPointGroup)
        .args(x, cos, sin, to_int(heads, "heads"), to_int(x.size(2), "head size"),
              to_int(cos.size(1), "rotary size"), to_int(T, "tokens"))
        .run({static_cast<size_t>(heads * half), static_cast<size_t>(T)}, {kPointGroup, 1});
  }

  void silu_mul(const Tensor& gate_up, Tensor& out) override {
    std::lock_guard lock(mutex_);
    const int64_t T = out.size(0), I = out.size(1);
    kernel(out, pointwise_program(), "silu_mul", kPointGroup)
        .args(gate_up, out, to_int(I, "intermediate size"), to_int(T, "tokens"))
        .run({static_cast<size_t>(I), static_cast<size_t>(T)}, {kPointGroup, 1});
  }

  void add_(Tensor& x, const Tensor& y) override {
    std::lock_guard lock(mutex_);
    kernel(x, pointwise_program(), "add_inplace", kPointGroup)
        .args(x, y, x.numel())
        .run({static_cast<size_t>(x.numel()), 1}, {kPointGroup, 1});
  }

  void split_columns(const Tensor& x, std::span<Tensor* const> outs) override {
    std::lock_guard lock(mutex_);
    const int64_t T = x.size(0);
    if (T == 0) return;
    const int32_t total = to_int(x.numel() / T, "columns");
    int32_t first = 0;
    for (Tensor* o : outs) {
      const int32_t width = to_int(o->numel() / T, "columns");
      kernel(x, pointwise_program(), "copy_columns", kPointGroup)
          .args(x, total, first, *o, width, to_int(T, "rows"))
          .run({static_cast<size_t>(width), static_cast<size_t>(T)}, {kPointGroup, 1});
      first += width;
    }
  }

  void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& cache_k,
                      Tensor& cache_v) override {
    std::lock_guard lock(mutex_);
    const int64_t T = k.size(0), kv_dim = k.size(1) * k.size(2);
    kernel(cache_k, pointwise_program(), "kv_cache_write", kPointGroup)
        .args(k, v, slots, cache_k, cache_v, to_int(kv_dim, "KV row size"), to_int(T, "tokens"))
        .run({static_cast<size_t>(kv_dim), static_cast<size_t>(T)}, {kPointGroup, 1});
  }

  void paged_attention(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v,
                       const AttentionMetadata& meta, float scale, int64_t window, bool materialize_scores,
                       Tensor& out) override {
    std::lock_guard lock(mutex_);
    const int64_t T = q.size(0), heads = q.size(1);
    const Program program = attention_program(q.size(2));
    const auto common = [&](Launch& launch, auto... extra) {
      launch.args(q, cache_k, cache_v, meta.query_start, meta.context_lens, meta.block_tables, meta.positions,
                  to_int(meta.context_lens.size(0), "sequences"), to_int(heads, "heads"),
                  to_int(cache_k.size(2), "KV heads"), to_int(cache_k.size(1), "block size"),
                  to_int(meta.block_tables.size(1), "blocks per sequence"), scale, to_int(window, "window"),
                  out, extra...);
    };
    if (!materialize_scores) {
      Launch launch = kernel(out, program, "attention_online", kAttentionGroup);
      common(launch);
      launch.run({static_cast<size_t>(T * heads) * kAttentionGroup, 1}, {kAttentionGroup, 1});
      return;
    }
    if (T == 0) return;
    check(meta.max_context_len > 0, "attention: AttentionMetadata.max_context_len is ", meta.max_context_len,
          "; the eager form sizes its scores by it");
    const size_t row_bytes = static_cast<size_t>(heads * meta.max_context_len) * sizeof(float);
    const int64_t rows_per_launch =
        std::clamp<int64_t>(static_cast<int64_t>(scores_bytes_ / row_bytes), 1, T);
    const cl_mem scores = scratch(out, row_bytes * static_cast<size_t>(rows_per_launch));
    Launch launch = kernel(out, program, "attention_eager", kAttentionGroup);
    for (int64_t begin = 0; begin < T; begin += rows_per_launch) {
      const int64_t rows = std::min(rows_per_launch, T - begin);
      common(launch, scores, to_int(meta.max_context_len, "context length"), to_int(begin, "row"));
      launch.run({static_cast<size_t>(rows * heads) * kAttentionGroup, 1}, {kAttentionGroup, 1});
    }
  }

 private:
  struct DeviceState {
    std::map<std::string, ClKernel> kernels;  // by program, options and kernel name
    ClBuffer scores;                          // the eager attention's scratch
    size_t scores_capacity = 0;
  };

  // out[i] = x[rows[i]]: gather_rows, and embedding with x the table.
  void gather(const Tensor& x, const Tensor& rows, Tensor& out) {
    const int64_t R = rows.size(0), H = out.size(1);
    kernel(out, pointwise_program(), "gather_rows", kPointGroup)
        .args(x, rows, out, to_int(H, "row size"), to_int(R, "rows"))
        .run({static_cast<size_t>(H), static_cast<size_t>(R)}, {kPointGroup, 1});
  }

  // Kernel `name` of `program` (prefixed with common.cl) on the device of `on`, created once per device.
  // `group_items` is the work-group size its launches use, checked against what the device allows for it.
  Launch kernel(const Tensor& on, const Program& program, const char* name, size_t group_items) {
    XpuDevice& device = backend_.device(on.device().index);
    DeviceState& state = devices_[on.device().index];
    const std::string key = std::string(program.name) + " " + program.options + " " + name;
    auto it = state.kernels.find(key);
    if (it == state.kernels.end()) {
      const cl_program built = device.programs.get(
          program.name, std::string(kernel_sources::common) + program.source, program.options);
      cl_int status = CL_SUCCESS;
      ClKernel created(clCreateKernel(built, name, &status));
      cl_check(status, std::string("clCreateKernel(") + name + ")", device.where);
      size_t allowed = 0;
      cl_check(clGetKernelWorkGroupInfo(created.get(), device.id, CL_KERNEL_WORK_GROUP_SIZE, sizeof(allowed),
                                        &allowed, nullptr),
               "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)", device.where);
      check(allowed >= group_items, device.where, ": kernel ", name, " needs work-groups of ", group_items,
            " items; the device allows ", allowed);
      it = state.kernels.emplace(key, std::move(created)).first;
    }
    return Launch(device, it->second.get(), name);
  }

  // A scratch buffer of at least `bytes` on the device of `on`, kept and grown. A buffer replaced while
  // launches still use it lives until they finish (OpenCL defers the release).
  cl_mem scratch(const Tensor& on, size_t bytes) {
    DeviceState& state = devices_[on.device().index];
    if (state.scores_capacity < bytes) {
      const XpuDevice& device = backend_.device(on.device().index);
      cl_int status = CL_SUCCESS;
      ClBuffer buffer(clCreateBuffer(device.context.get(), CL_MEM_READ_WRITE, bytes, nullptr, &status));
      cl_check(status, "clCreateBuffer",
               device.where + ": attention scores of " + std::to_string(bytes) + " bytes");
      state.scores = std::move(buffer);
      state.scores_capacity = bytes;
    }
    return state.scores.get();
  }

  XpuBackend& backend_;
  size_t scores_bytes_;
  std::mutex mutex_;  // kernel arguments are per cl_kernel, shared by every caller
  std::map<int, DeviceState> devices_;
};

}  // namespace

std::unique_ptr<OpKernels> make_xpu_op_kernels(XpuBackend& backend, size_t scores_bytes) {
  return std::make_unique<XpuOpKernels>(backend, scores_bytes);
}

}  // namespace tfm::xpu

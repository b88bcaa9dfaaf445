#include "tfm/backend/xpu/xpu_kernels.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/backend/kernel_registry.h"
#include "tfm/backend/xpu/onednn_matmul.h"
#include "tfm/backend/xpu/programs.h"
#include "tfm/backend/xpu/xpu_backend.h"
#include "tfm/core/error.h"
#include "tfm/core/floats.h"

namespace tfm::xpu {
namespace {

constexpr int64_t kMinSplitKeys = 64;   // the flash form splits a row's keys in parts of at least this many,
constexpr int64_t kMaxSplits = 32;      // into at most this many
constexpr int64_t kArgmaxMinPart = 4096;  // argmax_rows splits a row in parts of at least this many columns,
constexpr int64_t kArgmaxMaxParts = 64;   // into at most this many (kArgmaxGroup or fewer: its merge's items)

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
    args_ = {};
    args_.values.reserve(2 * sizeof...(A));  // a Tensor is two values
    (set(a), ...);
    return *this;
  }

  // Runs over `items` per dimension, rounded up to whole work-groups of `group`; nothing when there are none.
  void run(std::array<size_t, 2> items, std::array<size_t, 2> group) {
    if (items[0] == 0 || items[1] == 0) return;
    const std::array<size_t, 2> global{round_up(items[0], group[0]), round_up(items[1], group[1])};
    enqueue_kernel(device_, kernel_, name_, args_, global, group);
  }

 private:
  template <typename T>
  void set_value(const T& value) {
    const auto index = static_cast<cl_uint>(args_.values.size());
    // The call's name is built only for an error: a decode step sets thousands of arguments.
    if (const cl_int status = clSetKernelArg(kernel_, index, sizeof(T), &value); status != CL_SUCCESS)
      cl_check(status, std::string("clSetKernelArg(") + name_ + ", " + std::to_string(index) + ")", device_.where);
    args_.add(value);
  }
  void set(const Tensor& t) {
    set(t.defined() ? static_cast<cl_mem>(t.storage()->data()) : cl_mem{nullptr});
    set_value(static_cast<cl_long>(t.defined() ? t.offset() : 0));
  }
  void set(cl_mem m) {
    set_value(m);
    if (m) args_.buffers.push_back(m);
  }
  void set(int32_t v) { set_value(static_cast<cl_int>(v)); }
  void set(int64_t v) { set_value(static_cast<cl_long>(v)); }
  void set(uint64_t v) { set_value(static_cast<cl_ulong>(v)); }
  void set(float v) { set_value(static_cast<cl_float>(v)); }

  XpuDevice& device_;
  cl_kernel kernel_;
  const char* name_;
  KernelArgs args_;
};

// The work-groups of linear_rows and norm_linear_rows for `columns` outputs, ROWS_GROUP / ROWS_LANES a group,
// and their program, built for the bound on the rows that covers M.
int64_t rows_groups(int64_t columns) {
  constexpr auto per_group = static_cast<int64_t>(kRowsGroup / kRowsLanes);
  return (columns + per_group - 1) / per_group;
}
const Program& rows_program(DType d, int64_t M) {
  return linear_program(d, static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(M))));
}

// Sets `launch`'s arguments as the attention kernels declare them (attention.cl's ATTENTION_ARGS): `queries`
// (paged_attention's q, or qkv_attention's fused projection), then a's caches, metadata and output, then
// `extra`, the kernel's own.
template <typename... Extra>
void attention_args(Launch& launch, const Tensor& queries, const op::PagedAttention& a,
                    const Extra&... extra) {
  const op::AttentionMetadata& meta = a.meta;
  launch.args(queries, a.cache_k, a.cache_v, meta.query_start, meta.context_lens, meta.block_tables,
              meta.positions, to_int(meta.context_lens.size(0), "sequences"), to_int(a.q.size(1), "heads"),
              to_int(a.cache_k.size(2), "KV heads"), to_int(a.cache_k.size(1), "block size"),
              to_int(meta.block_tables.size(1), "blocks per sequence"), a.scale, to_int(a.window, "window"),
              a.out, extra...);
}

// Tiles pay when sequences bring several query rows each (prefill); one or two a sequence (decode) take
// attention_flash's rows, split over work-groups.
bool uses_tiles(const op::PagedAttention& a) {
  return a.q.size(2) <= kMaxTileHeadDim && a.q.size(0) > 2 * a.meta.context_lens.size(0);
}

// attention_subgroup takes `a` where the device has Intel sub-groups of kAttentionSubGroup lanes, the head
// size is a whole number of block reads a lane (at most 16 of them) and both caches start 16-byte aligned.
bool subgroup_attention_fits(const op::PagedAttention& a, const DeviceCapabilities& device) {
  const int64_t D = a.q.size(2), lanes = static_cast<int64_t>(kAttentionSubGroup);
  return device.runs_intel_subgroups(kAttentionSubGroup) && D % lanes == 0 && D / lanes <= 16 &&
         rows_block_aligned(a.cache_k, D) && rows_block_aligned(a.cache_v, D);
}

// Parts to cut each of `rows` pieces of work `length` long into where the rows alone leave compute units idle
// (a decode step's attention rows, a greedy step's logits rows): enough for `per_unit` work-groups a compute
// unit of `device` over all rows, none shorter than `min_part`, at most `max_parts`.
int64_t parts_to_fill(const XpuDevice& device, int64_t per_unit, int64_t rows, int64_t length,
                      int64_t min_part, int64_t max_parts) {
  rows = std::max<int64_t>(1, rows);
  const int64_t by_device = (per_unit * device.capabilities.eu_count + rows - 1) / rows;
  const int64_t by_length = (length + min_part - 1) / min_part;
  return std::clamp<int64_t>(std::min(by_device, by_length), 1, max_parts);
}

// Parts each query row's keys are split into for the flash form (parts_to_fill), of the longest context the
// block tables hold: depends only on shapes, so a recorded command sequence stays valid.
int64_t attention_splits(const op::PagedAttention& a, const XpuDevice& device, int64_t per_unit) {
  const int64_t capacity = a.meta.block_tables.size(1) * a.cache_k.size(1);
  return parts_to_fill(device, per_unit, a.q.size(0) * a.q.size(1), capacity, kMinSplitKeys, kMaxSplits);
}

// A device buffer kept between launches and grown as they need (XpuKernels::Devices::grown).
struct GrownBuffer {
  ClBuffer buffer;
  size_t bytes = 0;
};

// A decode attention launch's work-groups: a (row, head) and a part of its keys each, and the parts' states
// and arrival counters where a row's keys are split.
struct SplitRows {
  size_t group_items = 0;
  std::array<size_t, 2> items{};
  cl_mem partial = nullptr, arrivals = nullptr;
};

}  // namespace

struct XpuKernels::Devices {
  Devices(XpuBackend& backend, size_t scores_bytes) : backend(backend), scores_bytes(scores_bytes) {}

  struct State {
    // By program (kept for the process: programs.h) and kernel name (a string literal).
    std::map<std::pair<const Program*, std::string_view>, ClKernel> kernels;
    GrownBuffer scratch;   // attention's scores or partial states, training kernels' partial sums
    GrownBuffer arrivals;  // counters of split work (decode attention's parts), zero between launches
  };

  // Kernel `name` of `program` (prefixed with common.cl) on the device of `on`, created once per device.
  // `group_items` is the work-group size its launches use, checked against what the device allows for it.
  Launch kernel(const Tensor& on, const Program& program, const char* name, size_t group_items) {
    XpuDevice& device = backend.device(on.device().index);
    State& state = states[on.device().index];
    const std::pair<const Program*, std::string_view> key(&program, name);
    auto it = state.kernels.find(key);
    if (it == state.kernels.end()) {
      const cl_program built = device.programs.get(program.name, program.text(), program.options);
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

  // A scratch buffer of at least `bytes` on the device of `on`.
  cl_mem scratch(const Tensor& on, size_t bytes) {
    return grown(on, states[on.device().index].scratch, bytes, false, "kernel scratch");
  }

  // The split-rows launch of `a` (attention_flash's work-groups, or attention_subgroup's where `subgroup`).
  SplitRows split_rows(const op::PagedAttention& a, const XpuDevice& device, bool subgroup) {
    SplitRows split;
    split.group_items = subgroup ? kAttentionSubGroup : kAttentionGroup;
    // Two of attention_flash's 64-item work-groups a compute unit; an Intel EU runs eight threads, each a
    // sub-group of attention_subgroup.
    const int64_t groups = a.q.size(0) * a.q.size(1), splits = attention_splits(a, device, subgroup ? 8 : 2);
    const size_t state_bytes = static_cast<size_t>(groups * splits * (a.q.size(2) + 2)) * sizeof(float);
    split.partial = splits > 1 ? scratch(a.out, state_bytes) : cl_mem{nullptr};
    split.arrivals = splits > 1 ? arrivals(a.out, static_cast<size_t>(groups)) : cl_mem{nullptr};
    split.items = {static_cast<size_t>(groups) * split.group_items, static_cast<size_t>(splits)};
    return split;
  }

  // At least `count` arrival counters on the device of `on`, zero: a kernel that counts on one sets it back
  // to zero when its last arrival has come.
  cl_mem arrivals(const Tensor& on, size_t count) {
    return grown(on, states[on.device().index].arrivals, count * sizeof(cl_int), true, "arrival counters");
  }

  // `b`, on the device of `on`, with at least `bytes`: kept, and replaced by a larger one when too small
  // (made from zeros on the host where `zeroed`, so no queued fill, which a graph being recorded could not
  // order). A buffer replaced while launches still use it lives until they finish (OpenCL defers the
  // release).
  cl_mem grown(const Tensor& on, GrownBuffer& b, size_t bytes, bool zeroed, const char* what) {
    if (b.bytes < bytes) {
      const XpuDevice& device = backend.device(on.device().index);
      std::vector<unsigned char> zeros(zeroed ? bytes : 0, 0);
      cl_int status = CL_SUCCESS;
      ClBuffer buffer(clCreateBuffer(device.context.get(),
                                     CL_MEM_READ_WRITE | (zeroed ? CL_MEM_COPY_HOST_PTR : 0), bytes,
                                     zeroed ? zeros.data() : nullptr, &status));
      cl_check(status, "clCreateBuffer",
               device.where + ": " + what + " of " + std::to_string(bytes) + " bytes");
      b.buffer = std::move(buffer);
      b.bytes = bytes;
    }
    return b.buffer.get();
  }

  // out[i] = x[rows[i]]: gather_rows, and embedding with x the table.
  void gather(const Tensor& x, const Tensor& rows, const Tensor& out) {
    const int64_t R = rows.size(0), H = out.size(1);
    kernel(out, copy_program(x.dtype()), "gather_rows", kPointGroup)
        .args(x, rows, out, to_int(H, "row size"), to_int(R, "rows"))
        .run({static_cast<size_t>(H), static_cast<size_t>(R)}, {kPointGroup, 1});
  }

  // out[t, out_first + c] = x[t, x_first + c] for the columns of the narrower of x and out (a block of
  // split_columns or concat_columns), both of T rows; returns how many.
  int64_t copy_columns(const Tensor& x, int64_t x_first, const Tensor& out, int64_t out_first, int64_t T) {
    if (T == 0) return 0;
    const int64_t x_width = x.numel() / T, out_width = out.numel() / T;
    const int64_t width = std::min(x_width, out_width);
    kernel(out, copy_program(x.dtype()), "copy_columns", kPointGroup)
        .args(x, to_int(x_width, "columns"), to_int(x_first, "column"), out, to_int(out_width, "columns"),
              to_int(out_first, "column"), to_int(width, "columns"), to_int(T, "rows"))
        .run({static_cast<size_t>(width), static_cast<size_t>(T)}, {kPointGroup, 1});
    return width;
  }

  XpuBackend& backend;
  size_t scores_bytes;
  std::mutex mutex;  // kernel arguments are per cl_kernel, shared by every caller
  std::map<int, State> states;
};

XpuKernels::XpuKernels(XpuBackend& backend, size_t scores_bytes)
    : devices_(std::make_unique<Devices>(backend, scores_bytes)) {}

XpuKernels::~XpuKernels() = default;

void XpuKernels::run(const op::Embedding& a) {
  std::lock_guard lock(devices_->mutex);
  devices_->gather(a.table, a.ids, a.out);
}

void XpuKernels::run(const op::GatherRows& a) {
  std::lock_guard lock(devices_->mutex);
  devices_->gather(a.x, a.rows, a.out);
}

void XpuKernels::run(const op::SplitColumns& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t T = a.x.size(0);
  int64_t first = 0;
  for (Tensor* o : a.outs) first += devices_->copy_columns(a.x, first, *o, 0, T);
}

void XpuKernels::run(const op::KvCacheWrite& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t T = a.k.size(0), kv_dim = a.k.size(1) * a.k.size(2);
  devices_->kernel(a.cache_k, copy_program(a.dtype()), "kv_cache_write", kPointGroup)
      .args(a.k, a.v, a.slots, a.cache_k, a.cache_v, to_int(kv_dim, "KV row size"), to_int(T, "tokens"))
      .run({static_cast<size_t>(kv_dim), static_cast<size_t>(T)}, {kPointGroup, 1});
}

void XpuKernels::run(const op::Linear& a, LinearVariant variant) {
  std::lock_guard lock(devices_->mutex);
  const int64_t M = a.x.size(0), K = a.x.size(1), N = a.w.size(0);
  const auto m = to_int(M, "rows"), k = to_int(K, "inner size"), n = to_int(N, "columns");
  if (M == 0) return;
  const DeviceCapabilities& capabilities = devices_->backend.device(a.y.device().index).capabilities;
  if (const std::optional<IntelLinearLaunch> intel = intel_linear_launch(variant, a, capabilities)) {
    devices_->kernel(a.y, *intel->program, intel->kernel, intel->group[0] * intel->group[1])
        .args(a.x, a.w, a.bias, a.y, m, k, n)
        .run(intel->items, intel->group);
  } else if (M <= kRowsMax) {
    devices_->kernel(a.y, rows_program(a.dtype(), M), "linear_rows", kRowsGroup)
        .args(a.x, a.w, a.bias, a.y, m, k, n, int32_t{0})
        .run({static_cast<size_t>(rows_groups(N)) * kRowsGroup, 1}, {kRowsGroup, 1});
  } else {
    devices_->kernel(a.y, linear_program(a.dtype()), "linear_tiled", kTileItems * kTileItems)
        .args(a.x, a.w, a.bias, a.y, m, k, n)
        .run(tiled_items(M, N), {kTileItems, kTileItems});
  }
}

void XpuKernels::run(const op::NormLinear& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t M = a.residual.size(0), K = a.residual.size(1), N = a.w.size(0);
  const size_t items = static_cast<size_t>(rows_groups(a.gated ? N / 2 : N)) * kRowsGroup;
  if (!a.norm_weight.defined()) {
    devices_->kernel(a.y, rows_program(a.dtype(), M), "linear_rows", kRowsGroup)
        .args(a.residual, a.w, a.bias, a.y, to_int(M, "rows"), to_int(K, "inner size"), to_int(N, "columns"),
              static_cast<int32_t>(a.gated))
        .run({items, 1}, {kRowsGroup, 1});
    return;
  }
  devices_->kernel(a.y, rows_program(a.dtype(), M), "norm_linear_rows", kRowsGroup)
      .args(a.residual, a.x, a.norm_weight, a.eps, a.w, a.bias, a.residual_out, a.y, to_int(M, "rows"),
            to_int(K, "inner size"), to_int(N, "columns"), static_cast<int32_t>(a.gated))
      .run({items, 1}, {kRowsGroup, 1});
}

void XpuKernels::run(const op::RmsNorm& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t D = a.weight.size(0);
  devices_->kernel(a.out, pointwise_program(a.dtype()), "rms_norm", kRmsGroup)
      .args(a.x, a.weight, a.eps, a.out, to_int(D, "RMSNorm size"))
      .run({static_cast<size_t>(a.x.numel() / D) * kRmsGroup, 1}, {kRmsGroup, 1});
}

void XpuKernels::run(const op::AddRmsNorm& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t D = a.weight.size(0);
  devices_->kernel(a.out, pointwise_program(a.dtype()), "add_rms_norm", kRmsGroup)
      .args(a.residual, a.x, a.weight, a.eps, a.out, to_int(D, "RMSNorm size"))
      .run({static_cast<size_t>(a.residual.numel() / D) * kRmsGroup, 1}, {kRmsGroup, 1});
}

void XpuKernels::run(const op::Rope& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t T = a.x.size(0), heads = a.x.size(1), half = a.cos.size(1) / 2;
  devices_->kernel(a.x, pointwise_program(a.dtype()), "rope", kPointGroup)
      .args(a.x, a.cos, a.sin, to_int(heads, "heads"), to_int(a.x.size(2), "head size"),
            to_int(a.cos.size(1), "rotary size"), to_int(T, "tokens"))
      .run({static_cast<size_t>(heads * half), static_cast<size_t>(T)}, {kPointGroup, 1});
}

void XpuKernels::run(const op::QkvRopeCache& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t T = a.q.size(0), heads = a.q.size(1), D = a.q.size(2), kv_heads = a.cache_k.size(2);
  check(D <= kMaxHeadDim, "xpu kernel qkv_rope_cache: head size ", D, " is over its ", kMaxHeadDim);
  devices_->kernel(a.q, pointwise_program(a.dtype()), "qkv_rope_cache", kRmsGroup)
      .args(a.qkv, a.q_norm, a.k_norm, a.eps, a.cos, a.sin, a.slots, a.q, a.cache_k, a.cache_v,
            to_int(heads, "heads"), to_int(kv_heads, "KV heads"), to_int(D, "head size"),
            to_int(a.cos.size(1), "rotary size"))
      .run({static_cast<size_t>(heads + kv_heads) * kRmsGroup, static_cast<size_t>(T)}, {kRmsGroup, 1});
}

void XpuKernels::run(const op::ArgmaxRows& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t R = a.x.size(0), V = a.x.size(1);
  if (R == 0) return;
  const int64_t parts =
      parts_to_fill(devices_->backend.device(a.x.device().index), 2, R, V, kArgmaxMinPart, kArgmaxMaxParts);
  const cl_mem partial = parts > 1
                             ? devices_->scratch(a.x, static_cast<size_t>(R * parts * 3) * sizeof(float))
                             : cl_mem{nullptr};
  const cl_mem arrivals = parts > 1 ? devices_->arrivals(a.x, static_cast<size_t>(R)) : cl_mem{nullptr};
  devices_->kernel(a.ids, pointwise_program(a.dtype()), "argmax_rows", kArgmaxGroup)
      .args(a.x, a.ids, to_int(V, "row size"), partial, arrivals)
      .run({static_cast<size_t>(parts) * kArgmaxGroup, static_cast<size_t>(R)}, {kArgmaxGroup, 1});
}

void XpuKernels::run(const op::SampleRows& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t R = a.logits.size(0), V = a.logits.size(1);
  // Rows that leave compute units idle are cut slice by slice first (sampling.cl), in slices of whole bitmap
  // words: about one work-group a compute unit, none shorter than kSampleSlice.
  int64_t splits = parts_to_fill(devices_->backend.device(a.logits.device().index), 1, R, V, kSampleSlice,
                                 kSampleMaxSplits);
  const int64_t slice = round_up(static_cast<size_t>((V + splits - 1) / splits), 32);
  splits = (V + slice - 1) / slice;
  // Scratch: the rows' bitmaps of penalized tokens, then the slices' candidates (pairs of ints), then their counts.
  const int64_t mark_words = R * ((V + 31) / 32), pairs = splits > 1 ? R * splits * kSampleCandidates : 0;
  const int64_t candidates_at = (mark_words + 1) / 2;      // in pairs
  const int64_t counts_at = 2 * (candidates_at + pairs);  // in ints
  const cl_mem scratch =
      devices_->scratch(a.logits, static_cast<size_t>(counts_at + (splits > 1 ? R * splits : 0) + 1) * 4);
  const Program& program = sampling_program(a.dtype());
  if (splits > 1) {
    devices_->kernel(a.ids, program, "sample_candidates", kSampleGroup)
        .args(a.logits, a.settings, a.penalties, to_int(a.penalties.size(0), "penalty entries"), scratch,
              scratch, candidates_at, scratch, counts_at, to_int(V, "row size"), to_int(slice, "slice"))
        .run({static_cast<size_t>(splits) * kSampleGroup, static_cast<size_t>(R)}, {kSampleGroup, 1});
  }
  devices_->kernel(a.ids, program, "sample_rows", kSampleGroup)
      .args(a.logits, a.settings, a.penalties, to_int(a.penalties.size(0), "penalty entries"), scratch,
            scratch, candidates_at, scratch, counts_at, to_int(splits, "splits"), a.ids,
            to_int(V, "row size"))
      .run({static_cast<size_t>(R) * kSampleGroup, 1}, {kSampleGroup, 1});
}

void XpuKernels::run(const op::SiluMul& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t T = a.out.size(0), I = a.out.size(1);
  devices_->kernel(a.out, pointwise_program(a.dtype()), "silu_mul", kPointGroup)
      .args(a.gate_up, a.out, to_int(I, "intermediate size"), to_int(T, "tokens"))
      .run({static_cast<size_t>(I), static_cast<size_t>(T)}, {kPointGroup, 1});
}

void XpuKernels::run(const op::Add& a) {
  std::lock_guard lock(devices_->mutex);
  devices_->kernel(a.x, pointwise_program(a.dtype()), "add_inplace", kPointGroup)
      .args(a.x, a.y, a.x.numel())
      .run({static_cast<size_t>(a.x.numel()), 1}, {kPointGroup, 1});
}

void XpuKernels::run(const op::Cast& a) {
  std::lock_guard lock(devices_->mutex);
  devices_->kernel(a.out, cast_program(a.x.dtype(), a.out.dtype()), "cast", kPointGroup)
      .args(a.x, a.out, a.x.numel())
      .run({static_cast<size_t>(a.x.numel()), 1}, {kPointGroup, 1});
}

void XpuKernels::run(const op::PagedAttention& a, AttentionForm form) {
  std::lock_guard lock(devices_->mutex);
  const op::AttentionMetadata& meta = a.meta;
  const int64_t T = a.q.size(0), heads = a.q.size(1);
  const Program& program = attention_program(a.dtype(), a.q.size(2));
  if (form == AttentionForm::flash && uses_tiles(a)) {
    // Enough work-groups for a partial tile in every sequence; those past the tiles take no rows.
    const int64_t rows = attention_tile(a.q.size(2)).rows;
    const int64_t tiles = (T + rows - 1) / rows + meta.context_lens.size(0);
    Launch launch = devices_->kernel(a.out, program, "attention_tiles", kAttentionGroup);
    attention_args(launch, a.q, a);
    launch.run({static_cast<size_t>(tiles) * kAttentionGroup, static_cast<size_t>(heads)},
               {kAttentionGroup, 1});
    return;
  }
  if (form != AttentionForm::eager) {
    // Rows (and parts of their keys) a work-group each: attention_flash's items, or one Intel sub-group.
    const XpuDevice& device = devices_->backend.device(a.out.device().index);
    const bool subgroup =
        form == AttentionForm::intel_subgroup || subgroup_attention_fits(a, device.capabilities);
    const SplitRows split = devices_->split_rows(a, device, subgroup);
    Launch launch = subgroup ? devices_->kernel(a.out, intel_attention_program(a.dtype(), a.q.size(2)),
                                                "attention_subgroup", split.group_items)
                             : devices_->kernel(a.out, program, "attention_flash", split.group_items);
    attention_args(launch, a.q, a, split.partial, split.arrivals);
    launch.run(split.items, {split.group_items, 1});
    return;
  }
  if (T == 0) return;
  check(meta.max_context_len > 0, "attention: AttentionMetadata.max_context_len is ", meta.max_context_len,
        "; the eager form sizes its scores by it");
  const size_t row_bytes = static_cast<size_t>(heads * meta.max_context_len) * sizeof(float);
  const int64_t rows_per_launch =
      std::clamp<int64_t>(static_cast<int64_t>(devices_->scores_bytes / row_bytes), 1, T);
  const cl_mem scores = devices_->scratch(a.out, row_bytes * static_cast<size_t>(rows_per_launch));
  Launch launch = devices_->kernel(a.out, program, "attention_eager", kAttentionGroup);
  for (int64_t begin = 0; begin < T; begin += rows_per_launch) {
    const int64_t rows = std::min(rows_per_launch, T - begin);
    attention_args(launch, a.q, a, scores, to_int(meta.max_context_len, "context length"),
                   to_int(begin, "row"));
    launch.run({static_cast<size_t>(rows * heads) * kAttentionGroup, 1}, {kAttentionGroup, 1});
  }
}

void XpuKernels::run(const op::QkvAttention& a, AttentionForm form) {
  std::lock_guard lock(devices_->mutex);
  const int64_t D = a.out.size(2);
  const XpuDevice& device = devices_->backend.device(a.out.device().index);
  const op::PagedAttention paged = a.attention();
  const bool subgroup =
      form == AttentionForm::intel_subgroup || subgroup_attention_fits(paged, device.capabilities);
  const SplitRows split = devices_->split_rows(paged, device, subgroup);
  Launch launch = subgroup ? devices_->kernel(a.out, intel_attention_program(a.dtype(), D),
                                              "qkv_attention_subgroup", split.group_items)
                           : devices_->kernel(a.out, attention_program(a.dtype(), D), "qkv_attention_flash",
                                              split.group_items);
  attention_args(launch, a.qkv, paged, split.partial, split.arrivals, a.q_norm, a.k_norm, a.eps, a.cos, a.sin,
                 a.meta.slots, to_int(a.cos.size(1), "rotary size"));
  launch.run(split.items, {split.group_items, 1});
}

void XpuKernels::run(const op::ConcatColumns& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t T = a.out.size(0);
  int64_t first = 0;
  for (const Tensor* in : a.ins) first += devices_->copy_columns(*in, 0, a.out, first, T);
}

// A launch a block: the portable path issues its launches from the host either way.
void XpuKernels::run(const op::AddScaledColumns& a) {
  std::lock_guard lock(devices_->mutex);
  for (const op::ScaledColumns& b : a.blocks) {
    const int64_t T = b.out.size(0);
    devices_->kernel(b.out, pointwise_program(a.dtype()), "add_scaled_columns", kPointGroup)
        .args(b.out, to_int(b.out.size(1), "columns"), to_int(b.out_column, "column"), b.x,
              to_int(b.x.size(1), "columns"), to_int(b.x_column, "column"), to_int(b.width, "width"), b.scale,
              to_int(T, "rows"), static_cast<int>(a.accumulate))
        .run({static_cast<size_t>(b.width), static_cast<size_t>(T)}, {kPointGroup, 1});
  }
}

void XpuKernels::run(const op::Dropout& a) {
  std::lock_guard lock(devices_->mutex);
  const float keep_scale = 1.f / (1.f - a.p);  // as the CPU rounds it
  devices_->kernel(a.out, pointwise_program(a.dtype()), "dropout", kPointGroup)
      .args(a.x, a.p, a.seed, keep_scale, a.out, a.x.numel())
      .run({static_cast<size_t>(a.x.numel()), 1}, {kPointGroup, 1});
}

void XpuKernels::run(const op::LinearAdd& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t M = a.x.size(0), K = a.x.size(1), N = a.N();
  if (M == 0 || N == 0) return;
  const auto m = to_int(M, "rows"), k = to_int(K, "inner size"), n = to_int(N, "columns");
  // y (M, N) += x (M, K) @ b, b's element (k, n) at k * b_inner + n * b_col: w (N, K) read as w^T, or w (K,
  // N).
  const int64_t b_inner = a.w_by_columns ? N : 1, b_col = a.w_by_columns ? 1 : K;
  devices_->kernel(a.y, linear_program(a.dtype()), "matmul_add", kTileItems * kTileItems)
      .args(a.x, int64_t{K}, int64_t{1}, a.w, b_inner, b_col, m, k, n, a.y)
      .run(tiled_items(M, N), {kTileItems, kTileItems});
}

void XpuKernels::run(const op::LinearBackward& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t M = a.x.size(0), K = a.x.size(1), N = a.w.size(0);
  const auto m = to_int(M, "rows"), k = to_int(K, "inner size"), n = to_int(N, "columns");
  const Program& program = linear_program(a.dtype());
  if (a.dx.defined()) {  // dx (M, K) = dy (M, N) @ w (N, K)
    devices_->kernel(a.dx, program, "matmul_store", kTileItems * kTileItems)
        .args(a.dy, int64_t{N}, int64_t{1}, a.w, int64_t{K}, int64_t{1}, m, n, k, a.dx)
        .run(tiled_items(M, K), {kTileItems, kTileItems});
  }
  if (a.dw.defined()) {  // dw (N, K) += dy^T (N, M) @ x (M, K)
    devices_->kernel(a.dw, program, "matmul_accumulate", kTileItems * kTileItems)
        .args(a.dy, int64_t{1}, int64_t{N}, a.x, int64_t{K}, int64_t{1}, n, m, k, a.dw)
        .run(tiled_items(N, K), {kTileItems, kTileItems});
  }
  if (a.dbias.defined()) {
    devices_->kernel(a.dbias, program, "column_sums", kPointGroup)
        .args(a.dy, m, n, a.dbias)
        .run({static_cast<size_t>(N), 1}, {kPointGroup, 1});
  }
}

void XpuKernels::run(const op::RmsNormBackward& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t D = a.weight.size(0), rows = a.x.numel() / std::max<int64_t>(D, 1);
  if (rows == 0 || (!a.dx.defined() && !a.dweight.defined())) return;
  const Program& program = pointwise_program(a.dtype());
  const int32_t dim = to_int(D, "RMSNorm size");
  const cl_mem inv = devices_->scratch(a.x, static_cast<size_t>(rows) * sizeof(float));
  devices_->kernel(a.x, program, "rms_norm_inverse", kRmsGroup)
      .args(a.x, a.eps, inv, dim)
      .run({static_cast<size_t>(rows) * kRmsGroup, 1}, {kRmsGroup, 1});
  if (a.dweight.defined()) {  // before dx, which may overwrite dout
    devices_->kernel(a.x, program, "rms_norm_dweight", kNormBlock * kNormBlock)
        .args(a.x, a.dout, inv, a.dweight, dim, to_int(rows, "rows"))
        .run({static_cast<size_t>(D), kNormBlock}, {kNormBlock, kNormBlock});
  }
  if (a.dx.defined()) {
    devices_->kernel(a.x, program, "rms_norm_dx", kRmsGroup)
        .args(a.x, a.weight, a.dout, inv, a.dx, dim, static_cast<int32_t>(a.accumulate))
        .run({static_cast<size_t>(rows) * kRmsGroup, 1}, {kRmsGroup, 1});
  }
}

void XpuKernels::run(const op::SiluMulBackward& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t T = a.dout.size(0), I = a.dout.size(1);
  devices_->kernel(a.dout, pointwise_program(a.dtype()), "silu_mul_backward", kPointGroup)
      .args(a.gate_up, a.dout, a.dgate_up, to_int(I, "intermediate size"), to_int(T, "tokens"))
      .run({static_cast<size_t>(I), static_cast<size_t>(T)}, {kPointGroup, 1});
}

void XpuKernels::run(const op::EmbeddingBackward& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t H = a.dout.size(1);
  devices_->kernel(a.dtable, training_program(a.dtype()), "embedding_backward", kPointGroup)
      .args(a.ids, a.dout, a.dtable, to_int(H, "row size"), to_int(a.ids.size(0), "tokens"),
            to_int(a.dtable.size(0), "table rows"))
      .run({static_cast<size_t>(H), 1}, {kPointGroup, 1});
}

void XpuKernels::run(const op::AttentionBackward& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t T = a.q.size(0), heads = a.q.size(1), kv_heads = a.k.size(1);
  if (T == 0) return;
  const Program& program = attention_backward_program(a.dtype(), a.q.size(2));
  // The rows' softmax statistics, from the dq kernel to the dk/dv kernel: maximum, denominator, dout . out.
  const cl_mem stats = devices_->scratch(a.q, static_cast<size_t>(T * heads * 3) * sizeof(float));
  const auto common = [&](Launch& launch, auto&... extra) {
    launch.args(a.q, a.k, a.v, a.dout, a.query_start, to_int(a.query_start.size(0) - 1, "sequences"),
                to_int(heads, "heads"), to_int(kv_heads, "KV heads"), a.scale, to_int(a.window, "window"),
                stats, extra...);
  };
  // Tiles of a sequence's rows (head sizes up to 128): work-groups (tile, head); else (row, head) in one
  // index.
  const bool tiles = a.q.size(2) <= kMaxBackwardTileHeadDim;
  const int64_t tile_rows = attention_backward_tile(a.q.size(2)).rows;
  const int64_t row_groups = tiles ? (T + tile_rows - 1) / tile_rows + a.query_start.size(0) - 1 : T;
  const auto run = [&](const char* kernel, const char* tiled, int64_t heads_of, const Tensor& on,
                       auto&... outputs) {
    Launch launch = devices_->kernel(on, program, tiles ? tiled : kernel, kAttentionGroup);
    common(launch, outputs...);
    const auto groups = static_cast<size_t>(tiles ? row_groups : row_groups * heads_of);
    launch.run({groups * kAttentionGroup, static_cast<size_t>(tiles ? heads_of : 1)}, {kAttentionGroup, 1});
  };
  run("attention_backward_dq", "attention_backward_dq_tiles", heads, a.dq, a.out, a.dq);
  run("attention_backward_dkv", "attention_backward_dkv_tiles", kv_heads, a.dk, a.dk, a.dv);
}

void XpuKernels::run(const op::CrossEntropy& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t R = a.logits.size(0);
  const Program& program = training_program(a.dtype());
  const cl_mem row_loss =
      devices_->scratch(a.loss, static_cast<size_t>(std::max<int64_t>(R, 1)) * sizeof(float));
  devices_->kernel(a.loss, program, "cross_entropy", kReduceGroup)
      .args(a.logits, a.labels, a.grad_scale, row_loss, a.dlogits, to_int(a.logits.size(1), "vocabulary"))
      .run({static_cast<size_t>(R) * kReduceGroup, 1}, {kReduceGroup, 1});
  devices_->kernel(a.loss, program, "sum_into", kReduceGroup)
      .args(row_loss, to_int(R, "rows"), a.loss, int32_t{0})
      .run({kReduceGroup, 1}, {kReduceGroup, 1});
}

void XpuKernels::run(const op::SumSquares& a) {
  std::lock_guard lock(devices_->mutex);
  const int64_t n = a.x.numel();
  if (n == 0) return;
  const Program& program = training_program(DType::float32);
  const size_t parts = std::min((static_cast<size_t>(n) + kReduceGroup - 1) / kReduceGroup, kReduceParts);
  const cl_mem partial = devices_->scratch(a.out, parts * sizeof(float));
  devices_->kernel(a.out, program, "sum_squares_parts", kReduceGroup)
      .args(a.x, n, partial)
      .run({parts * kReduceGroup, 1}, {kReduceGroup, 1});
  devices_->kernel(a.out, program, "sum_into", kReduceGroup)
      .args(partial, static_cast<int32_t>(parts), a.out, int32_t{1})
      .run({kReduceGroup, 1}, {kReduceGroup, 1});
}

void XpuKernels::run(const op::AdamW& a) {
  std::lock_guard lock(devices_->mutex);
  const AdamWScalars s = a.scalars();
  const DType param_dtype = a.param.defined() ? a.param.dtype() : DType::float32;
  devices_->kernel(a.master, training_program(param_dtype), "adamw", kPointGroup)
      .args(a.master, a.grad, a.exp_avg, a.exp_avg_sq, a.param, a.master.numel(), s.grad_scale, s.decay,
            s.one_minus_beta1, s.beta2, s.one_minus_beta2, s.step_size, s.bias2_sqrt, s.eps)
      .run({static_cast<size_t>(a.master.numel()), 1}, {kPointGroup, 1});
}

XpuKernels& xpu_kernels() {
  static XpuKernels* kernels = new XpuKernels(xpu_backend());  // never destroyed, as the backend
  return *kernels;
}

namespace {

template <typename Op>
void run_on_xpu(const Op& a) {
  xpu_kernels().run(a);
}

template <LinearVariant Variant>
void linear_on_xpu(const op::Linear& a) {
  // Past the few rows of decode steps, the default hands matmuls to oneDNN where it takes the device, but not
  // into a device graph: oneDNN enqueues on the queue itself, which a recording would not hold.
  if (Variant == LinearVariant::automatic && a.x.size(0) > kRowsMax &&
      !xpu_backend().device(a.y.device().index).recording && onednn_linear().accepts(a))
    return onednn_linear().run(a);
  xpu_kernels().run(a, Variant);
}

template <LinearVariant Variant>
bool xpu_linear_supports(const op::Linear& a) {
  return intel_linear_supports(Variant, a, xpu_backend().device(a.y.device().index).capabilities);
}

template <AttentionForm Form>
void attention_on_xpu(const op::PagedAttention& a) {
  xpu_kernels().run(a, Form);
}

bool xpu_subgroup_attention_fits(const op::PagedAttention& a) {
  return subgroup_attention_fits(a, xpu_backend().device(a.out.device().index).capabilities);
}

// qkv_attention_subgroup keeps a dimension's rotary partner in its own lane: the rotary half must be whole
// sub-groups of dimensions.
bool qkv_subgroup_attention_fits(const op::QkvAttention& a) {
  return xpu_subgroup_attention_fits(a.attention()) &&
         (a.cos.size(1) / 2) % static_cast<int64_t>(kAttentionSubGroup) == 0;
}

// The flash form folds where the paged attention's flash form runs: the sub-group form where it serves decode
// (an Intel GPU) and takes the rotary size, else the portable one. Elsewhere the layer keeps qkv_rope_cache.
bool qkv_attention_fits(const op::QkvAttention& a) {
  return !xpu_subgroup_attention_fits(a.attention()) || qkv_subgroup_attention_fits(a);
}

template <AttentionForm Form>
void qkv_attention_on_xpu(const op::QkvAttention& a) {
  xpu_kernels().run(a, Form);
}

// Linears of more rows than linear_rows serves go to oneDNN on the devices it takes (onednn_matmul.h).
void linear_on_onednn(const op::Linear& a) {
  onednn_linear().run(a);
}

bool onednn_takes(const op::Linear& a) {
  return onednn_linear().accepts(a);
}

// norm_linear_rows keeps the normalised rows in local memory, and each work-group pays for the norm: the fold
// pays where the work-groups fit the device about at once (four a compute unit). On the H200 through OpenCL,
// batch-1 decode with use_kernels (folded) against without (norms and SiLU gate apart): the 0.6B shape (qkv
// and gate/up 512 and 384 groups) 306-361 against 213-222 tokens/s; the 8B shape (768, 1,536) 106 against
// 131. Without a norm (the gate alone folded) the rows come from global memory as linear_rows reads them.
bool norm_linear_fits(const op::NormLinear& a) {
  const int64_t M = a.residual.size(0), K = a.residual.size(1);
  if (!(M >= 1 && M <= kRowsMax)) return false;
  if (!a.norm_weight.defined()) return true;
  const int64_t groups = rows_groups(a.gated ? a.w.size(0) / 2 : a.w.size(0));
  const int64_t units = xpu_backend().device(a.y.device().index).capabilities.eu_count;
  return M * K <= kNormRows && groups <= 4 * units;
}

}  // namespace

void register_kernels(KernelRegistry& r) {
  constexpr DeviceType xpu = DeviceType::xpu;
  for (DType d : kComputeDTypes) {
    r.add<op::Embedding>(xpu, d, "default", {.run = run_on_xpu<op::Embedding>, .is_default = true});
    r.add<op::GatherRows>(xpu, d, "default", {.run = run_on_xpu<op::GatherRows>, .is_default = true});
    r.add<op::SplitColumns>(xpu, d, "default", {.run = run_on_xpu<op::SplitColumns>, .is_default = true});
    r.add<op::KvCacheWrite>(xpu, d, "default", {.run = run_on_xpu<op::KvCacheWrite>, .is_default = true});
    r.add<op::Add>(xpu, d, "default", {.run = run_on_xpu<op::Add>, .is_default = true});
    r.add<op::Cast>(xpu, d, "default", {.run = run_on_xpu<op::Cast>, .is_default = true});
    r.add<op::RmsNorm>(xpu, d, "default", {.run = run_on_xpu<op::RmsNorm>, .is_default = true});
    r.add<op::AddRmsNorm>(xpu, d, "fused", {.run = run_on_xpu<op::AddRmsNorm>});
    r.add<op::NormLinear>(xpu, d, "fused",
                          {.run = run_on_xpu<op::NormLinear>, .supports = norm_linear_fits, .is_default = true});
    r.add<op::Rope>(xpu, d, "default", {.run = run_on_xpu<op::Rope>, .is_default = true});
    r.add<op::QkvRopeCache>(xpu, d, "default", {.run = run_on_xpu<op::QkvRopeCache>, .is_default = true});
    r.add<op::ArgmaxRows>(xpu, d, "default", {.run = run_on_xpu<op::ArgmaxRows>, .is_default = true});
    r.add<op::SampleRows>(xpu, d, "default", {.run = run_on_xpu<op::SampleRows>, .is_default = true});
    r.add<op::SiluMul>(xpu, d, "default", {.run = run_on_xpu<op::SiluMul>, .is_default = true});
    r.add<op::Linear>(xpu, d, "default", {.run = linear_on_xpu<LinearVariant::automatic>, .is_default = true});
    r.add<op::Linear>(xpu, d, "portable", {.run = linear_on_xpu<LinearVariant::portable>});
    r.add<op::Linear>(xpu, d, "intel_subgroup",
                      {.run = linear_on_xpu<LinearVariant::intel_subgroup>,
                       .supports = xpu_linear_supports<LinearVariant::intel_subgroup>});
    if (d != DType::float32) {  // DPAS multiplies bf16 and f16 only
      r.add<op::Linear>(xpu, d, "dpas",
                        {.run = linear_on_xpu<LinearVariant::dpas>,
                         .supports = xpu_linear_supports<LinearVariant::dpas>});
    }
    r.add<op::Linear>(xpu, d, "onednn", {.run = linear_on_onednn, .supports = onednn_takes});
    r.add<op::PagedAttention>(xpu, d, "flash",
                              {.run = attention_on_xpu<AttentionForm::flash>, .is_default = true});
    r.add<op::PagedAttention>(xpu, d, "eager", {.run = attention_on_xpu<AttentionForm::eager>});
    r.add<op::PagedAttention>(
        xpu, d, "intel_subgroup",
        {.run = attention_on_xpu<AttentionForm::intel_subgroup>, .supports = xpu_subgroup_attention_fits});
    r.add<op::QkvAttention>(xpu, d, "flash",
                            {.run = qkv_attention_on_xpu<AttentionForm::flash>,
                             .supports = qkv_attention_fits,
                             .is_default = true});
    r.add<op::QkvAttention>(xpu, d, "intel_subgroup",
                            {.run = qkv_attention_on_xpu<AttentionForm::intel_subgroup>,
                             .supports = qkv_subgroup_attention_fits});
    r.add<op::ConcatColumns>(xpu, d, "default", {.run = run_on_xpu<op::ConcatColumns>, .is_default = true});
    r.add<op::AddScaledColumns>(xpu, d, "default",
                                {.run = run_on_xpu<op::AddScaledColumns>, .is_default = true});
    r.add<op::Dropout>(xpu, d, "default", {.run = run_on_xpu<op::Dropout>, .is_default = true});
    r.add<op::LinearAdd>(xpu, d, "default", {.run = run_on_xpu<op::LinearAdd>, .is_default = true});
    r.add<op::LinearBackward>(xpu, d, "default", {.run = run_on_xpu<op::LinearBackward>, .is_default = true});
    r.add<op::RmsNormBackward>(xpu, d, "default",
                               {.run = run_on_xpu<op::RmsNormBackward>, .is_default = true});
    r.add<op::SiluMulBackward>(xpu, d, "default",
                               {.run = run_on_xpu<op::SiluMulBackward>, .is_default = true});
    r.add<op::EmbeddingBackward>(xpu, d, "default",
                                 {.run = run_on_xpu<op::EmbeddingBackward>, .is_default = true});
    r.add<op::AttentionBackward>(xpu, d, "default",
                                 {.run = run_on_xpu<op::AttentionBackward>, .is_default = true});
    r.add<op::CrossEntropy>(xpu, d, "default", {.run = run_on_xpu<op::CrossEntropy>, .is_default = true});
  }
  r.add<op::SumSquares>(xpu, DType::float32, "default",
                        {.run = run_on_xpu<op::SumSquares>, .is_default = true});
  r.add<op::AdamW>(xpu, DType::float32, "default", {.run = run_on_xpu<op::AdamW>, .is_default = true});
}

}  // namespace tfm::xpu

// The OpenCL C programs of the xpu kernels with their build options, and the work-group shapes those options
// fix. The runtime builds them from these functions, and the ocloc gate (tests/ocloc) compiles every one of
// them for Intel targets through every_program, so the options exist once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "tfm/backend/xpu/device_capabilities.h"
#include "tfm/core/dtype.h"

namespace tfm::xpu {

// Work-group shapes; the programs get them as build options, so host and kernels agree.
inline constexpr size_t kPointGroup = 64;  // items along the columns of the pointwise kernels
inline constexpr size_t kRmsGroup = 128;   // rms_norm: items per row; qkv_rope_cache: per head
inline constexpr int64_t kMaxHeadDim = 512;  // qkv_rope_cache keeps a head in local memory
inline constexpr size_t kArgmaxGroup = 256;  // argmax_rows: items per row
inline constexpr size_t kSampleGroup = 256;  // sample_rows: items per row (sample_candidates: per slice)
inline constexpr int64_t kSampleSlice = 4096;       // sample_candidates: a slice's tokens, at least,
inline constexpr int64_t kSampleMaxSplits = 64;     // in at most this many slices a row;
inline constexpr int64_t kSampleMaxSplitTopK = 64;  // for rows with a top-k up to this,
inline constexpr int64_t kSampleCandidates = 128;   // keeping up to this many candidates a slice
inline constexpr size_t kTile = 64;        // linear_tiled: a 64x64 block of y per work-group,
inline constexpr size_t kTileK = 16;       // staged 16 columns of K at a time,
inline constexpr size_t kTileReg = 4;      // 4x4 outputs per item: 16x16 items
inline constexpr size_t kTileItems = kTile / kTileReg;
// The work-items (columns, rows) of linear.cl's tiled kernels for an output of rows x cols.
inline std::array<size_t, 2> tiled_items(int64_t rows, int64_t cols) {
  return {(static_cast<size_t>(cols) + kTile - 1) / kTile * kTileItems,
          (static_cast<size_t>(rows) + kTile - 1) / kTile * kTileItems};
}
inline constexpr int64_t kRowsMax = 8;         // linear_rows serves x of up to 8 rows (decode steps),
inline constexpr size_t kRowsGroup = 256;      // with work-groups of 256 items,
inline constexpr size_t kRowsLanes = 32;       // 32 of them on each output column
static_assert(kRowsMax <= kRowsLanes, "linear_rows writes one output row per lane");
inline constexpr int64_t kNormRows = 4096;     // norm_linear_rows: rows x K normalised values in local memory
inline constexpr size_t kAttentionGroup = 64;  // items per (query row, head)
inline constexpr size_t kAttentionSubGroup = 16;  // attention_subgroup (Intel): lanes per (query row, head)
// The tiled attention kernels: a work-group owns `rows` rows of a sequence (query rows; keys in the dk/dv
// kernel) and meets `partners` of the other side at a time in local memory, items in 8 groups of 8. Their
// local memory, `sides` tiles of each (rows + partners) head vectors of head_dim + 1 floats and of rows x
// (partners + 1) weights, and three numbers a row, stays within the 32 KB OpenCL guarantees every device.
struct AttentionTile {
  int64_t rows, partners;
};
constexpr int64_t tile_local_bytes(AttentionTile t, int64_t head_dim, int64_t sides) {
  return 4 *
         (sides * (t.rows + t.partners) * (head_dim + 1) + sides * t.rows * (t.partners + 1) + 3 * t.rows);
}
static_assert(kAttentionGroup == 64, "the tiled attention kernels arrange their items as 8 groups of 8");
// attention_tiles (prefill; q against keys, then values): 32 rows and 16 keys up to head size 128, 16 and 8
// up to 256. Larger heads take attention_flash's rows.
inline constexpr int64_t kMaxTileHeadDim = 256;
constexpr AttentionTile attention_tile(int64_t head_dim) {
  return head_dim <= 128 ? AttentionTile{32, 16} : AttentionTile{16, 8};
}
static_assert(tile_local_bytes(attention_tile(128), 128, 1) <= 32768 &&
              tile_local_bytes(attention_tile(kMaxTileHeadDim), kMaxTileHeadDim, 1) <= 32768);
// attention_backward's tiled kernels (q and dout against keys and values): 32 and 16 up to head size 64, 16
// and 8 up to 128. Larger heads take the kernels of a work-group a row.
inline constexpr int64_t kMaxBackwardTileHeadDim = 128;
constexpr AttentionTile attention_backward_tile(int64_t head_dim) {
  return head_dim <= 64 ? AttentionTile{32, 16} : AttentionTile{16, 8};
}
static_assert(tile_local_bytes(attention_backward_tile(64), 64, 2) <= 32768 &&
              tile_local_bytes(attention_backward_tile(kMaxBackwardTileHeadDim), kMaxBackwardTileHeadDim,
                               2) <= 32768);
inline constexpr size_t kNormBlock = 16;       // rms_norm_dweight: 16 columns x 16 row lanes a work-group
inline constexpr size_t kReduceGroup = 256;    // cross_entropy: items per row; sums over work-groups
inline constexpr size_t kReduceParts = 256;    // sum_squares: at most this many work-groups' partial sums

// A source of kernels/ with the options it is built with: one program per dtype (and shape constants). The
// functions below return programs kept for the process, one per distinct arguments, so that a launch finds its
// kernel by the program's address instead of building and comparing option strings (a decode step launches
// ~260 kernels).
struct Program {
  const char* name;
  const char* source;  // without kernels/common.cl
  std::string options;

  // What is compiled: common.cl, then the source.
  std::string text() const;
};

// The DTYPE option of common.cl's storage macros ("-DDTYPE=bf16"), or another macro's.
std::string dtype_option(DType d, const char* macro = "DTYPE");

const Program& copy_program(DType d);  // copies move bits: one program per element size
const Program& cast_program(DType from, DType to);
const Program& pointwise_program(DType d);
// linear_rows is built for a bound on the rows (1, 2, 4 or 8) so that a decode step of one sequence keeps one
// accumulator a column in registers, not eight: fewer registers, more work-groups resident at once. Linear's
// backward runs the tiled product of the default.
const Program& linear_program(DType d, int64_t rows_max = kRowsMax);
const Program& attention_program(DType d, int64_t head_dim);
// attention_subgroup, the flash form on devices with Intel's sub-groups (kAttentionSubGroup lanes).
const Program& intel_attention_program(DType d, int64_t head_dim);
const Program& attention_backward_program(DType d, int64_t head_dim);
const Program& sampling_program(DType d);
// embedding's backward, cross_entropy, sum_squares and adamw (whose dtype is its param copy's).
const Program& training_program(DType d);

// The program `make` returns, made once per `args` and kept for the process (each call site of interned has its
// own table, as each lambda is a type of its own).
template <typename Make, typename... Args>
const Program& interned(const Make& make, const Args&... args) {
  static std::mutex mutex;
  static std::map<std::tuple<Args...>, Program> programs;
  std::lock_guard<std::mutex> lock(mutex);
  const std::tuple<Args...> key(args...);
  auto it = programs.find(key);
  if (it == programs.end()) it = programs.emplace(key, make()).first;
  return it->second;
}

// Every program the kernels may build on a device with `device`'s capabilities: the portable ones in every
// dtype (attention at the usual head sizes, its only open-ended option) and the Intel variants it can run.
std::vector<Program> every_program(const DeviceCapabilities& device);

}  // namespace tfm::xpu

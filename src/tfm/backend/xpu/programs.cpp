#include "tfm/backend/xpu/programs.h"

#include "tfm/backend/xpu/intel_linear.h"
#include "tfm/backend/xpu/kernel_sources.h"
#include "tfm/core/floats.h"

namespace tfm::xpu {

std::string Program::text() const {
  return std::string(kernel_sources::common) + source;
}

std::string dtype_option(DType d, const char* macro) {
  const char* name = d == DType::float32 ? "f32" : d == DType::bfloat16 ? "bf16" : "f16";
  return std::string("-D") + macro + "=" + name;
}

namespace {

std::string attention_options(DType d, int64_t head_dim) {
  return dtype_option(d) + " -DHEAD_DIM=" + std::to_string(head_dim) +
         " -DATT_GROUP=" + std::to_string(kAttentionGroup);
}

}  // namespace

const Program& copy_program(DType d) {
  return interned(
      [&] {
        return Program{"copy", kernel_sources::copy, dtype_size(d) == 2 ? "-DWORD=ushort" : "-DWORD=uint"};
      },
      dtype_size(d));
}

const Program& cast_program(DType from, DType to) {
  return interned(
      [&] {
        return Program{"cast", kernel_sources::cast,
                       dtype_option(from) + " " + dtype_option(to, "OUT_DTYPE")};
      },
      from, to);
}

const Program& pointwise_program(DType d) {
  return interned(
      [&] {
        return Program{"pointwise", kernel_sources::pointwise,
                       dtype_option(d) + " -DRMS_GROUP=" + std::to_string(kRmsGroup) + " -DMAX_HEAD_DIM=" +
                           std::to_string(kMaxHeadDim) + " -DARGMAX_GROUP=" + std::to_string(kArgmaxGroup) +
                           " -DNORM_BLOCK=" + std::to_string(kNormBlock)};
      },
      d);
}

const Program& linear_program(DType d, int64_t rows_max) {
  return interned(
      [&] {
        return Program{"linear", kernel_sources::linear,
                       dtype_option(d) + " -DTILE=" + std::to_string(kTile) +
                           " -DTILE_K=" + std::to_string(kTileK) + " -DTILE_REG=" + std::to_string(kTileReg) +
                           " -DROWS_MAX=" + std::to_string(rows_max) + " -DROWS_GROUP=" +
                           std::to_string(kRowsGroup) + " -DROWS_LANES=" + std::to_string(kRowsLanes) +
                           " -DNORM_ROWS=" + std::to_string(kNormRows)};
      },
      d, rows_max);
}

const Program& attention_program(DType d, int64_t head_dim) {
  return interned(
      [&] {
        std::string options = attention_options(d, head_dim);
        if (head_dim <= kMaxTileHeadDim) {
          const AttentionTile tile = attention_tile(head_dim);
          options +=
              " -DTILE_ROWS=" + std::to_string(tile.rows) + " -DTILE_KEYS=" + std::to_string(tile.partners);
        }
        return Program{"attention", kernel_sources::attention, options};
      },
      d, head_dim);
}

const Program& intel_attention_program(DType d, int64_t head_dim) {
  return interned(
      [&] {
        return Program{
            "intel_attention", kernel_sources::attention,
            attention_options(d, head_dim) + " -DATT_SUB_GROUP=" + std::to_string(kAttentionSubGroup)};
      },
      d, head_dim);
}

const Program& attention_backward_program(DType d, int64_t head_dim) {
  return interned(
      [&] {
        std::string options = attention_options(d, head_dim);
        if (head_dim <= kMaxBackwardTileHeadDim) {
          const AttentionTile tile = attention_backward_tile(head_dim);
          options +=
              " -DBWD_BIG=" + std::to_string(tile.rows) + " -DBWD_SMALL=" + std::to_string(tile.partners);
        }
        return Program{"attention_backward", kernel_sources::attention_backward, options};
      },
      d, head_dim);
}

const Program& sampling_program(DType d) {
  return interned(
      [&] {
        return Program{"sampling", kernel_sources::sampling,
                       dtype_option(d) + " -DSAMPLE_GROUP=" + std::to_string(kSampleGroup) +
                           " -DMAX_SPLITS=" + std::to_string(kSampleMaxSplits) +
                           " -DMAX_SPLIT_TOP_K=" + std::to_string(kSampleMaxSplitTopK) +
                           " -DMAX_CANDIDATES=" + std::to_string(kSampleCandidates)};
      },
      d);
}

const Program& training_program(DType d) {
  return interned(
      [&] {
        return Program{"training", kernel_sources::training,
                       dtype_option(d) + " -DREDUCE_GROUP=" + std::to_string(kReduceGroup)};
      },
      d);
}

std::vector<Program> every_program(const DeviceCapabilities& device) {
  std::vector<Program> programs = {copy_program(DType::float32), copy_program(DType::bfloat16)};
  for (DType d : kComputeDTypes) {
    for (DType to : kComputeDTypes) programs.push_back(cast_program(d, to));
    programs.push_back(pointwise_program(d));
    for (int64_t rows_max = 1; rows_max <= kRowsMax; rows_max *= 2)
      programs.push_back(linear_program(d, rows_max));
    programs.push_back(training_program(d));
    programs.push_back(sampling_program(d));
    for (int64_t head_dim : {64, 80, 96, 128, 256}) {
      programs.push_back(attention_program(d, head_dim));
      programs.push_back(attention_backward_program(d, head_dim));
      if (device.runs_intel_subgroups(kAttentionSubGroup) && head_dim % kAttentionSubGroup == 0)
        programs.push_back(intel_attention_program(d, head_dim));
    }
    for (Program& p : intel_linear_programs(d, device)) programs.push_back(std::move(p));
  }
  return programs;
}

}  // namespace tfm::xpu

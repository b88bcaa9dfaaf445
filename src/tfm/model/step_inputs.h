// One forward step's integer inputs (token ids, the attention metadata, the rows whose logits are wanted) on
// the device, packed into one buffer so that a step uploads them in one copy; and a decode batch padded to the
// fixed shape of a captured device graph.
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/model/batch.h"
#include "tfm/ops/ops.h"

namespace tfm {

// Views into one int32 device buffer.
struct StepInputs {
  Tensor buffer;
  Tensor ids;          // (T)
  Tensor logits_rows;  // (R)
  ops::AttentionMetadata meta;
};

// A buffer on `device` shaped for `batch` (its sizes only), with its views.
StepInputs allocate_step_inputs(const ForwardBatch& batch, Device device);
// Copies `batch` into `inputs`, which allocate_step_inputs made for a batch of the same sizes.
void upload_step_inputs(const ForwardBatch& batch, StepInputs& inputs);

// `batch` (decode rows only: one row per sequence, each row's logits wanted) padded to `rows` sequences and
// `max_blocks` blocks per table: padding sequences have no context, so attention gives them zeros, and their
// cache slot is -1, which kv_cache_write skips.
ForwardBatch pad_decode_batch(const ForwardBatch& batch, int64_t rows, int64_t max_blocks);

// Whether `batch` is decode rows only, as pad_decode_batch takes.
bool is_decode_batch(const ForwardBatch& batch);

}  // namespace tfm

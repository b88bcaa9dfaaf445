#include "tfm/model/step_inputs.h"

#include <algorithm>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"

namespace tfm {
namespace {

int64_t length(const std::vector<int32_t>& v) {
  return static_cast<int64_t>(v.size());
}

// The int32 vectors of a batch in buffer order, with each one's shape.
struct Part {
  const std::vector<int32_t>* values;
  Shape shape;
};
std::vector<Part> parts(const ForwardBatch& b) {
  const int64_t T = length(b.token_ids), S = length(b.context_lens);
  return {{&b.token_ids, {T}},        {&b.logits_rows, {length(b.logits_rows)}},
          {&b.query_start, {S + 1}},  {&b.context_lens, {S}},
          {&b.block_tables, {S, b.max_blocks}}, {&b.positions, {T}},
          {&b.slots, {T}}};
}

// Whether each sequence of `b` brings one query row (decode), row s being sequence s's.
bool one_row_per_sequence(const ForwardBatch& b) {
  const int64_t S = length(b.context_lens);
  if (length(b.token_ids) != S || length(b.query_start) != S + 1) return false;
  for (int64_t s = 0; s < S; ++s) {
    if (b.query_start[static_cast<size_t>(s)] != s) return false;
  }
  return true;
}

// Whether row t's cache slot is t for every row of `b`.
bool slots_in_order(const ForwardBatch& b) {
  for (size_t t = 0; t < b.slots.size(); ++t) {
    if (b.slots[t] != static_cast<int32_t>(t)) return false;
  }
  return true;
}

}  // namespace

StepInputs allocate_step_inputs(const ForwardBatch& batch, Device device) {
  const std::vector<Part> all = parts(batch);
  int64_t total = 0;
  for (const Part& p : all) total += shape_numel(p.shape);
  StepInputs in;
  in.buffer = empty({std::max<int64_t>(total, 1)}, DType::int32, device);
  std::vector<Tensor> views;
  int64_t offset = 0;
  for (const Part& p : all) {
    views.push_back(in.buffer.narrow(offset, shape_numel(p.shape)).reshape(p.shape));
    offset += shape_numel(p.shape);
  }
  in.ids = views[0];
  in.logits_rows = views[1];
  in.meta.query_start = views[2];
  in.meta.context_lens = views[3];
  in.meta.block_tables = views[4];
  in.meta.positions = views[5];
  in.meta.slots = views[6];
  const auto longest = std::max_element(batch.context_lens.begin(), batch.context_lens.end());
  in.meta.max_context_len = longest == batch.context_lens.end() ? 0 : *longest;
  in.meta.one_row_per_sequence = one_row_per_sequence(batch);
  in.meta.slots_in_order = slots_in_order(batch);
  return in;
}

void upload_step_inputs(const ForwardBatch& batch, StepInputs& inputs) {
  std::vector<int32_t> packed;
  packed.reserve(static_cast<size_t>(inputs.buffer.numel()));
  for (const Part& p : parts(batch)) {
    check(length(*p.values) == shape_numel(p.shape), "step inputs: a batch vector does not match its shape");
    packed.insert(packed.end(), p.values->begin(), p.values->end());
  }
  check(static_cast<int64_t>(packed.size()) <= inputs.buffer.numel(), "step inputs: the batch outgrew its buffer");
  if (!packed.empty()) copy_from_host(inputs.buffer.narrow(0, static_cast<int64_t>(packed.size())), packed.data());
}

bool is_decode_batch(const ForwardBatch& b) {
  const int64_t S = length(b.context_lens);
  if (!one_row_per_sequence(b) || length(b.logits_rows) != S) return false;
  for (int64_t s = 0; s < S; ++s) {
    if (b.logits_rows[static_cast<size_t>(s)] != s) return false;
  }
  return true;
}

ForwardBatch pad_decode_batch(const ForwardBatch& b, int64_t rows, int64_t max_blocks) {
  const int64_t S = length(b.context_lens);
  check(is_decode_batch(b) && S <= rows && b.max_blocks <= max_blocks, "pad_decode_batch: the batch does not fit");
  ForwardBatch p;
  p.max_blocks = max_blocks;
  p.token_ids = b.token_ids;
  p.positions = b.positions;
  p.context_lens = b.context_lens;
  p.slots = b.slots;
  p.token_ids.resize(static_cast<size_t>(rows), 0);
  p.positions.resize(static_cast<size_t>(rows), 0);
  p.context_lens.resize(static_cast<size_t>(rows), 0);
  p.slots.resize(static_cast<size_t>(rows), -1);
  p.query_start.resize(static_cast<size_t>(rows + 1));
  p.logits_rows.resize(static_cast<size_t>(rows));
  for (int64_t s = 0; s <= rows; ++s) p.query_start[static_cast<size_t>(s)] = static_cast<int32_t>(s);
  for (int64_t s = 0; s < rows; ++s) p.logits_rows[static_cast<size_t>(s)] = static_cast<int32_t>(s);
  p.block_tables.assign(static_cast<size_t>(rows * max_blocks), -1);
  for (int64_t s = 0; s < S; ++s) {
    std::copy_n(b.block_tables.begin() + s * b.max_blocks, b.max_blocks,
                p.block_tables.begin() + s * max_blocks);
  }
  return p;
}

}  // namespace tfm

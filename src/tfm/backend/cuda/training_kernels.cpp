// The CUDA training kernels of the op set (training.cu; attention's and qkv_rope's backward beside their
// forwards, in attention_backward.cu and attention_inputs.cu; linear's in linear.cpp): each makes its
// tensors' device current, unpacks the op and calls a launcher of launchers.h.
#include <array>
#include <vector>

#include "tfm/backend/backend.h"
#include "tfm/backend/cuda/cuda_backend.h"
#include "tfm/backend/cuda/kernel_tensors.h"
#include "tfm/backend/cuda/launchers.h"
#include "tfm/backend/cuda/runtime.h"
#include "tfm/backend/op_set.h"
#include "tfm/backend/pointer_args.h"
#include "tfm/core/floats.h"

namespace tfm::cuda {
namespace {

static_assert(launch::kIgnoreLabel == op::CrossEntropy::kIgnoreIndex);

template <typename T>
void rms_norm_backward(const op::RmsNormBackward& a) {
  use_device_of(a.x);
  const int64_t dim = a.weight.size(0);
  launch::rms_norm_backward(a.x.data<T>(), a.weight.data<T>(), a.dout.data<T>(), dim ? a.x.numel() / dim : 0,
                            dim, a.eps, a.accumulate, data_or_null<T>(a.dx), data_or_null<float>(a.dweight));
}

template <typename T>
void qkv_rope_backward(const op::QkvRopeBackward& a) {
  use_device_of(a.dqkv);
  launch::qkv_rope_backward<T>({a.qkv.raw(), raw_or_null(a.q_norm), raw_or_null(a.k_norm), a.eps, a.cos.raw(),
                                a.sin.raw(), a.dq.raw(), a.dk.raw(), a.dv.raw(), a.dqkv.raw(),
                                data_or_null<float>(a.dq_norm), data_or_null<float>(a.dk_norm), a.dq.size(0),
                                a.dq.size(1), a.dk.size(1), a.dq.size(2), a.cos.size(1)});
}

template <typename T>
void silu_mul_backward(const op::SiluMulBackward& a) {
  use_device_of(a.dout);
  launch::silu_mul_backward(a.gate_up.data<T>(), a.dout.data<T>(), a.dout.size(0), a.dout.size(1),
                            a.dgate_up.data<T>());
}

template <typename T>
void embedding_backward(const op::EmbeddingBackward& a) {
  use_device_of(a.dout);
  launch::embedding_backward(a.ids.data<int32_t>(), a.dout.data<T>(), a.dout.size(0), a.dout.size(1),
                             a.dtable.data<float>());
}

template <typename T>
void attention_backward(const op::AttentionBackward& a) {
  use_device_of(a.q);
  const Tensor stats = empty({2, a.q.size(0), a.q.size(1)}, DType::float32, a.q.device());  // lse, delta
  const launch::AttentionBackwardArgs args{a.query_start.data<int32_t>(),
                                           a.query_start.size(0) - 1,
                                           a.q.size(0),
                                           a.q.size(1),
                                           a.k.size(1),
                                           a.q.size(2),
                                           a.window,
                                           a.scale,
                                           data_or_null<float>(a.lse),
                                           a.max_rows};
  const Tensor kept = workspace_beside(a.q, launch::attention_backward_kept_bytes<T>(args));
  launch::attention_backward(args, a.q.data<T>(), a.k.data<T>(), a.v.data<T>(), a.out.data<T>(),
                             a.dout.data<T>(), stats[0].data<float>(), stats[1].data<float>(),
                             workspace_pointer(kept), a.dq.data<T>(), a.dk.data<T>(), a.dv.data<T>());
}

template <typename T>
void cross_entropy(const op::CrossEntropy& a) {
  use_device_of(a.logits);
  launch::cross_entropy(a.logits.data<T>(), a.labels.data<int32_t>(), a.logits.size(0), a.logits.size(1),
                        a.grad_scale, a.loss.data<float>(), a.dlogits.data<T>());
}

void sum_squares(const op::SumSquares& a) {
  use_device_of(a.x);
  launch::sum_squares(a.x.data<float>(), a.x.numel(), a.out.data<float>());
}

void adamw(const op::AdamW& a) {
  use_device_of(a.master);
  const AdamWScalars s = a.scalars();
  auto run = [&]<typename P>(P* param) {
    launch::adamw(a.master.data<float>(), a.grad.data<float>(), a.exp_avg.data<float>(), a.exp_avg_sq.data<float>(),
                  param, s, a.master.numel());
  };
  if (!a.param.defined()) return run(static_cast<float*>(nullptr));
  visit_float(a.param.dtype(), [&]<typename P>() { run(a.param.data<P>()); });
}

void concat_columns(const op::ConcatColumns& a) {
  use_device_of(a.out);
  const int64_t rows = a.out.size(0), element = static_cast<int64_t>(dtype_size(a.dtype()));
  const int64_t pitch = a.out.size(1) * element;
  std::vector<launch::RowCopy> copies;
  char* column = static_cast<char*>(a.out.raw());
  for (const Tensor* in : a.ins) {
    const int64_t bytes = rows ? static_cast<int64_t>(in->nbytes()) / rows : 0;
    copies.push_back({in->raw(), nullptr, bytes, column, nullptr, pitch, bytes});
    column += bytes;
  }
  launch::copy_rows(copies.data(), static_cast<int>(copies.size()), rows, "concat_columns");
}

static_assert(launch::kMaxScaledColumnsBlocks == op::AddScaledColumns::kMaxBlocks);

template <typename T>
void add_scaled_columns(const op::AddScaledColumns& a) {
  use_device_of(a.blocks.front().out);
  std::array<launch::ScaledColumnsBlock<T>, op::AddScaledColumns::kMaxBlocks> blocks;
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    const op::ScaledColumns& b = a.blocks[i];
    blocks[i] = {b.out.data<T>(), b.out.size(1), b.out_column, b.x.data<T>(), b.x.size(1),
                 b.x_column,      b.out.size(0), b.width,      b.scale};
  }
  launch::add_scaled_columns(blocks.data(), static_cast<int>(a.blocks.size()), a.accumulate);
}

template <typename T>
void dropout(const op::Dropout& a) {
  use_device_of(a.out);
  launch::dropout(a.x.data<T>(), a.p, a.seed, a.x.numel(), a.out.data<T>());
}

}  // namespace

void register_training_kernels(KernelRegistry& r) {
  constexpr DeviceType device = DeviceType::cuda;
  for (DType d : kComputeDTypes) {
    r.add<op::ConcatColumns>(device, d, "default", {.run = concat_columns, .is_default = true});
    visit_float(d, [&]<typename T>() {
      r.add<op::RmsNormBackward>(device, d, "default", {.run = rms_norm_backward<T>, .is_default = true});
      r.add<op::SiluMulBackward>(device, d, "default", {.run = silu_mul_backward<T>, .is_default = true});
      r.add<op::EmbeddingBackward>(device, d, "default", {.run = embedding_backward<T>, .is_default = true});
      r.add<op::AttentionBackward>(device, d, "default", {.run = attention_backward<T>, .is_default = true});
      r.add<op::QkvRopeBackward>(device, d, "default", {.run = qkv_rope_backward<T>, .is_default = true});
      r.add<op::CrossEntropy>(device, d, "default", {.run = cross_entropy<T>, .is_default = true});
      r.add<op::AddScaledColumns>(device, d, "default", {.run = add_scaled_columns<T>, .is_default = true});
      r.add<op::Dropout>(device, d, "default", {.run = dropout<T>, .is_default = true});
    });
  }
  r.add<op::SumSquares>(device, DType::float32, "default", {.run = sum_squares, .is_default = true});
  r.add<op::AdamW>(device, DType::float32, "default", {.run = adamw, .is_default = true});
}

}  // namespace tfm::cuda

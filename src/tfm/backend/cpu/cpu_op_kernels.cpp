// The CPU backend's op kernels: unpack tensors and call the plain kernels of kernels.h.
#include "tfm/backend/cpu/cpu_backend.h"
#include "tfm/backend/cpu/kernels.h"
#include "tfm/backend/pointer_args.h"

namespace tfm {
namespace {

class CpuOpKernels final : public OpKernels {
 public:
  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    cpu::embedding(table.data<float>(), ids.data<int32_t>(), ids.size(0), table.size(1), out.data<float>());
  }
  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) override {
    cpu::linear(x.data<float>(), w.data<float>(), bias.defined() ? bias.data<float>() : nullptr, x.size(0),
                x.size(1), w.size(0), y.data<float>());
  }
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    const int64_t D = weight.size(0);
    cpu::rms_norm(x.data<float>(), weight.data<float>(), x.numel() / D, D, eps, out.data<float>());
  }
  void rope_(Tensor& x, const Tensor& cos, const Tensor& sin) override {
    cpu::rope(x.data<float>(), cos.data<float>(), sin.data<float>(), x.size(0), x.size(1), x.size(2),
              cos.size(1));
  }
  void silu_mul(const Tensor& gate_up, Tensor& out) override {
    cpu::silu_mul(gate_up.data<float>(), out.size(0), out.size(1), out.data<float>());
  }
  void add_(Tensor& x, const Tensor& y) override {
    cpu::add_inplace(x.data<float>(), y.data<float>(), x.numel());
  }
  void split_columns(const Tensor& x, std::span<Tensor* const> outs) override {
    const ColumnSplit s = column_split(outs, x.size(0));
    cpu::split_columns(x.data<float>(), x.size(0), s.outs.data(), s.widths.data(),
                       static_cast<int64_t>(s.outs.size()));
  }
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) override {
    cpu::gather_rows(x.data<float>(), x.size(1), rows.data<int32_t>(), rows.size(0), out.data<float>());
  }
  void kv_cache_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& cache_k,
                      Tensor& cache_v) override {
    const int64_t T = k.size(0);
    cpu::kv_cache_write(k.data<float>(), v.data<float>(), slots.data<int32_t>(), T, T ? k.numel() / T : 0,
                        cache_k.data<float>(), cache_v.data<float>());
  }
  void paged_attention(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v,
                       const AttentionMetadata& meta, float scale, int64_t window, bool materialize_scores,
                       Tensor& out) override {
    cpu::paged_attention(paged_attention_args(q, cache_k, cache_v, meta, scale, window, out),
                         materialize_scores);
  }
};

}  // namespace

OpKernels& cpu_op_kernels() {
  static CpuOpKernels kernels;
  return kernels;
}

}  // namespace tfm

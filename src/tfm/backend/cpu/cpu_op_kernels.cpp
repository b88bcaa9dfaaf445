// The CPU backend's op kernels: unpack tensors and call the plain kernels of kernels.h.
#include <vector>

#include "tfm/backend/cpu/cpu_backend.h"
#include "tfm/backend/cpu/kernels.h"

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
    const int64_t T = x.size(0);
    std::vector<float*> dst;
    std::vector<int64_t> widths;
    for (Tensor* o : outs) {
      dst.push_back(o->data<float>());
      widths.push_back(o->numel() / T);
    }
    cpu::split_columns(x.data<float>(), T, dst.data(), widths.data(), static_cast<int64_t>(dst.size()));
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
    cpu::PagedAttentionArgs a{};
    a.q = q.data<float>();
    a.cache_k = cache_k.data<float>();
    a.cache_v = cache_v.data<float>();
    a.query_start = meta.query_start.data<int32_t>();
    a.context_lens = meta.context_lens.data<int32_t>();
    a.block_tables = meta.block_tables.data<int32_t>();
    a.positions = meta.positions.data<int32_t>();
    a.num_seqs = meta.context_lens.size(0);
    a.heads = q.size(1);
    a.kv_heads = cache_k.size(2);
    a.head_dim = q.size(2);
    a.block_size = cache_k.size(1);
    a.max_blocks = meta.block_tables.size(1);
    a.scale = scale;
    a.window = window;
    a.out = out.data<float>();
    cpu::paged_attention(a, materialize_scores);
  }
};

}  // namespace

OpKernels& cpu_op_kernels() {
  static CpuOpKernels kernels;
  return kernels;
}

}  // namespace tfm

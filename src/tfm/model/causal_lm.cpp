#include "tfm/model/causal_lm.h"

#include <algorithm>
#include <filesystem>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/core/floats.h"
#include "tfm/io/progress_bar.h"
#include "tfm/model/layers.h"
#include "tfm/model/rope.h"
#include "tfm/model/weights.h"

namespace tfm {
namespace {

// The dtype asked for, or config.json's for "auto"; either must be a floating-point one, in Transformers'
// words.
DType resolve_dtype(const std::string& requested, const ModelConfig& config) {
  const DType d = requested == "auto" ? config.dtype.value_or(DType::float32) : parse_dtype(requested);
  check(is_floating(d), config.architecture_name, " cannot be instantiated under `dtype=torch.",
        dtype_name(d), "` as it's not a floating-point dtype");
  return d;
}

// A dtype the device cannot compute in is an error naming both; so is one no kernel of the model's ops has.
void check_dtype_runs(DType dtype, Device device) {
  Backend* backend = find_backend(device.type);
  const bool compute = std::find(std::begin(kComputeDTypes), std::end(kComputeDTypes), dtype) != std::end(kComputeDTypes);
  check(compute && backend && backend->supports_dtype(device.index_or_zero(), dtype), device.str(),
        " cannot run models in ", dtype_name(dtype), compute ? "" : " (tfm computes in float32, bfloat16 and float16)");
  const std::vector<std::string_view> missing = ops::ops_without_kernels(device.type, dtype);
  if (!missing.empty()) {
    std::string names;
    for (std::string_view op : missing) names += std::string(names.empty() ? "" : ", ") + std::string(op);
    throw_error("tfm has no ", device_type_name(device.type), " kernels in ", dtype_name(dtype), " for ", names);
  }
}

// Transformers' attention implementations map onto the two forms of the Attention layer's kernels: eager
// materializes the scores; sdpa and the flash attentions are the fused one-pass form ("flash"), which every
// device has. Whether a device can run flash_attention_3 is its backend's answer, in Transformers' words.
std::string attention_variant(std::string name, Device device) {
  if (name.starts_with("paged|")) name = name.substr(6);
  if (name == "eager") return "eager";
  if (name == "sdpa" || name.empty() || name == "flash_attention_2") return "flash";
  if (name == "flash_attention_3") {
    const std::string why = find_backend(device.type)->attention_unavailable(device.index_or_zero(), name);
    check(why.empty(), "FlashAttention3 has been toggled on, but it cannot be used due to the following error: ",
          why);
    return "flash";
  }
  throw_error("Specified `attn_implementation=\"", name,
              "\"` is not supported. The only possible arguments are `attn_implementation=\"eager\"`, "
              "`\"paged|eager\"`, `\"sdpa\"`, `\"paged|sdpa\"`, `\"flash_attention_2\"`, "
              "`\"paged|flash_attention_2\"` and `\"flash_attention_3\"`");
}

// Host values rounded to `dtype` on the device.
Tensor upload_as(const Tensor& host_float32, DType dtype, Device device) {
  Tensor converted = Tensor::cpu(host_float32.shape(), dtype);
  ops::cast(host_float32, converted);
  return to_device(converted, device);
}

}  // namespace

struct CausalLM::Impl {
  ModelConfig config;
  DType dtype;
  Device device;
  std::string attention;  // the Attention layer's variant from attn_implementation
  bool use_kernels = false;
  KernelConfig kernel_config;
  bool training = false;
  LayerKernels kernels;
  RotaryEmbedding rope;
  Embedding embed_tokens;
  std::vector<DecoderLayer> layers;
  RMSNorm norm;
  Linear lm_head;
  size_t weight_bytes = 0;

  void resolve_kernels() {
    const KernelMode mode = training ? KernelMode::training : KernelMode::inference;
    kernels = resolve_layer_kernels(kernel_config, use_kernels, device.type, dtype, mode);
    if (!kernel_config.variant("Attention", device.type, mode)) kernels.variants["Attention"] = attention;
  }
};

CausalLM CausalLM::from_pretrained(const std::string& dir, const LoadOptions& options) {
  namespace fs = std::filesystem;
  check(fs::is_directory(dir), "model folder ", dir, " does not exist");
  const std::string config_path = (fs::path(dir) / "config.json").string();
  check(fs::exists(config_path), dir, " has no config.json");
  ModelConfig c = ModelConfig::from_file(config_path);
  const DType dtype = resolve_dtype(options.dtype, c);
  const Device device = resolve_device(options.device);
  check_dtype_runs(dtype, device);
  const std::string attention = attention_variant(options.attn_implementation, device);

  WeightLoader w(dir, c, dtype, device, options.progress && !io::progress_bars_disabled());
  size_t bytes = 0;
  auto tensor = [&](const std::string& name) {
    Tensor t = w.take(name);
    bytes += t.nbytes();
    return t;
  };
  auto optional = [&](const std::string& name) { return w.has(name) ? tensor(name) : Tensor(); };
  auto stacked = [&](const std::vector<std::string>& names) {
    Tensor t = w.take_rows(names);
    bytes += t.nbytes();
    return t;
  };
  auto linear = [&](const std::string& name, Tensor weight, Tensor bias) {
    return Linear(name, std::make_unique<DenseWeight>(std::move(weight)), std::move(bias));
  };
  const float eps = static_cast<float>(c.rms_norm_eps);

  Embedding embed_tokens("model.embed_tokens", tensor("model.embed_tokens.weight"));
  std::vector<DecoderLayer> layers;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", a = p + "self_attn.", m = p + "mlp.";
    auto qkv = [&](const char* what) {
      return std::vector<std::string>{a + "q_proj." + what, a + "k_proj." + what, a + "v_proj." + what};
    };
    RMSNorm input_layernorm(p + "input_layernorm", tensor(p + "input_layernorm.weight"), eps);
    Linear qkv_proj = linear(a + "qkv_proj", stacked(qkv("weight")), c.qkv_bias ? stacked(qkv("bias")) : Tensor());
    std::optional<RMSNorm> q_norm, k_norm;
    if (c.qk_norm) {
      q_norm.emplace(a + "q_norm", tensor(a + "q_norm.weight"), eps);
      k_norm.emplace(a + "k_norm", tensor(a + "k_norm.weight"), eps);
    }
    Linear o_proj = linear(a + "o_proj", tensor(a + "o_proj.weight"), optional(a + "o_proj.bias"));
    Attention self_attn(p + "self_attn",
                        {c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.window_of(l)},
                        std::move(qkv_proj), std::move(o_proj), std::move(q_norm), std::move(k_norm));
    RMSNorm post_attention_layernorm(p + "post_attention_layernorm", tensor(p + "post_attention_layernorm.weight"),
                                     eps);
    Linear gate_up_proj = linear(m + "gate_up_proj", stacked({m + "gate_proj.weight", m + "up_proj.weight"}),
                                 c.mlp_bias ? stacked({m + "gate_proj.bias", m + "up_proj.bias"}) : Tensor());
    Linear down_proj = linear(m + "down_proj", tensor(m + "down_proj.weight"), optional(m + "down_proj.bias"));
    layers.emplace_back(std::move(input_layernorm), std::move(self_attn), std::move(post_attention_layernorm),
                        MLP(p + "mlp", std::move(gate_up_proj), std::move(down_proj)));
  }
  RMSNorm norm("model.norm", tensor("model.norm.weight"), eps);
  Linear lm_head = linear("lm_head", c.tie_word_embeddings ? embed_tokens.table() : tensor("lm_head.weight"), Tensor());

  auto impl = std::unique_ptr<Impl>(new Impl{c,
                                             dtype,
                                             device,
                                             attention,
                                             options.use_kernels || !options.kernel_config.empty(),
                                             options.kernel_config,
                                             false,
                                             {},
                                             RotaryEmbedding(c),
                                             std::move(embed_tokens),
                                             std::move(layers),
                                             std::move(norm),
                                             std::move(lm_head),
                                             bytes});
  impl->resolve_kernels();
  return CausalLM(std::move(impl));
}

CausalLM::CausalLM(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CausalLM::CausalLM(CausalLM&&) noexcept = default;
CausalLM& CausalLM::operator=(CausalLM&&) noexcept = default;
CausalLM::~CausalLM() = default;

const ModelConfig& CausalLM::config() const {
  return impl_->config;
}
Device CausalLM::device() const {
  return impl_->device;
}
DType CausalLM::dtype() const {
  return impl_->dtype;
}
size_t CausalLM::weight_bytes() const {
  return impl_->weight_bytes;
}
bool CausalLM::training() const {
  return impl_->training;
}
const LayerKernels& CausalLM::layer_kernels() const {
  return impl_->kernels;
}

void CausalLM::train(bool mode) {
  if (impl_->training == mode) return;
  impl_->training = mode;
  impl_->resolve_kernels();
}

void CausalLM::set_use_kernels(bool use_kernels, const KernelConfig& config) {
  impl_->use_kernels = use_kernels;
  impl_->kernel_config = use_kernels ? config : KernelConfig();
  impl_->resolve_kernels();
}

KVCache CausalLM::make_cache(int64_t num_blocks, int64_t block_size) const {
  return KVCache::create(impl_->config, num_blocks, block_size, impl_->dtype, impl_->device);
}

Tensor CausalLM::forward(const ForwardBatch& batch, KVCache& cache, SavedActivations* saved) {
  Impl& m = *impl_;
  validate(batch, cache, m.config.vocab_size);
  check(static_cast<int64_t>(cache.layers.size()) == m.config.num_hidden_layers &&
            cache.layers[0].key.dtype() == m.dtype && cache.layers[0].key.device() == m.device,
        "forward: the KV cache was not made by this model (make_cache)");
  const int64_t T = static_cast<int64_t>(batch.token_ids.size());
  const int64_t S = static_cast<int64_t>(batch.context_lens.size());
  const int64_t R = static_cast<int64_t>(batch.logits_rows.size());
  auto upload = [&](const std::vector<int32_t>& v, Shape shape) {
    Tensor t = Tensor::cpu(shape, DType::int32);
    std::copy(v.begin(), v.end(), t.data<int32_t>());
    return to_device(t, m.device);
  };
  ops::AttentionMetadata meta;
  meta.query_start = upload(batch.query_start, {S + 1});
  meta.context_lens = upload(batch.context_lens, {S});
  meta.block_tables = upload(batch.block_tables, {S, batch.max_blocks});
  meta.positions = upload(batch.positions, {T});
  meta.slots = upload(batch.slots, {T});
  meta.max_context_len = *std::max_element(batch.context_lens.begin(), batch.context_lens.end());
  const Tensor ids = upload(batch.token_ids, {T});
  const Tensor logits_rows = upload(batch.logits_rows, {R});
  Tensor cos, sin;  // float32 on the host, rounded to the dtype as Transformers' rotary embedding returns them
  m.rope.tables(batch.positions, cos, sin);
  cos = upload_as(cos, m.dtype, m.device);
  sin = upload_as(sin, m.dtype, m.device);
  const StepContext ctx{m.device, m.dtype, meta, cos, sin, m.kernels, saved};

  Tensor h = m.embed_tokens.forward(ids, ctx);  // the residual stream (T, hidden)
  Tensor pending;                               // a block's output not yet added to h
  for (size_t l = 0; l < m.layers.size(); ++l) m.layers[l].forward(h, pending, cache.layers[l], ctx);
  // Only the rows whose logits are wanted go through the last residual add, the final norm and the head.
  Tensor last = ctx.empty({R, h.size(1)}), last_pending = ctx.empty({R, h.size(1)});
  ops::gather_rows(h, logits_rows, last);
  ops::gather_rows(pending, logits_rows, last_pending);
  const Tensor normed = m.norm.forward_residual(last, last_pending, ctx);
  const Tensor logits = to_device(m.lm_head.forward(normed, ctx), Device{});
  Tensor out = Tensor::cpu(logits.shape(), DType::float32);  // as generate() reads them: .float()
  ops::cast(logits, out);
  return out;
}

}  // namespace tfm

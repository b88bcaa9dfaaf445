#include "tfm/model/causal_lm.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"

namespace tfm {
namespace {

DType resolve_dtype(const std::string& requested, const ModelConfig& config) {
  if (requested == "auto") return config.dtype.value_or(DType::float32);
  const DType d = parse_dtype(requested);
  if (!is_floating(d) || d == DType::float8_e4m3fn || d == DType::float8_e5m2) {
    throw_error("Can't instantiate ", config.architecture_name, " model under dtype=", dtype_name(d),
                " since it is not a floating point dtype");
  }
  return d;
}

// Transformers' attention implementations map onto tfm's two kernel forms: eager materializes the scores;
// sdpa and the flash attentions are the fused one-pass form, which tfm has on every device. flash_attention_3
// keeps Transformers' device requirement (CUDA, compute capability 9.0 or more) and its error messages.
ops::AttentionImpl parse_attention(std::string name, Device device) {
  if (name.starts_with("paged|")) name = name.substr(6);
  if (name == "eager") return ops::AttentionImpl::eager;
  if (name == "sdpa" || name.empty() || name == "flash_attention_2") return ops::AttentionImpl::sdpa;
  if (name == "flash_attention_3") {
    const std::string preface =
        "FlashAttention3 has been toggled on, but it cannot be used due to the following error:";
    check(device.type == DeviceType::cuda, preface,
          " Flash Attention 3 is not available on CPU. Please make sure torch can access a CUDA device.");
    const int capability = find_backend(DeviceType::cuda)->info(device.index_or_zero()).compute_capability;
    check(capability >= 90, preface, " Flash Attention 3 requires compute capability >= 9.0, but found (",
          capability / 10, ", ", capability % 10, ") with compute capability ", capability / 10, ".0.");
    return ops::AttentionImpl::sdpa;
  }
  throw_error("Specified `attn_implementation=\"", name,
              "\"` is not supported. The only possible arguments are `attn_implementation=\"eager\"`, "
              "`\"paged|eager\"`, `\"sdpa\"`, `\"paged|sdpa\"`, `\"flash_attention_2\"`, "
              "`\"paged|flash_attention_2\"` and `\"flash_attention_3\"`");
}

}  // namespace

CausalLM CausalLM::from_pretrained(const std::string& dir, const LoadOptions& options) {
  namespace fs = std::filesystem;
  check(fs::is_directory(dir), "model folder ", dir, " does not exist");
  const std::string config_path = (fs::path(dir) / "config.json").string();
  check(fs::exists(config_path), dir, " has no config.json");
  ModelConfig config = ModelConfig::from_file(config_path);
  const DType dtype = resolve_dtype(options.dtype, config);
  const Device device = resolve_device(options.device);
  const ops::AttentionImpl attention = parse_attention(options.attn_implementation, device);
  ModelWeights weights = load_weights(dir, config, dtype, device);
  return CausalLM(std::move(config), std::move(weights), dtype, device, attention);
}

CausalLM::CausalLM(ModelConfig config, ModelWeights weights, DType dtype, Device device,
                   ops::AttentionImpl attention)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      dtype_(dtype),
      device_(device),
      attention_(attention),
      rope_(config_) {}

KVCache CausalLM::make_cache(int64_t num_blocks, int64_t block_size) const {
  return KVCache::create(config_, static_cast<int32_t>(num_blocks), block_size, device_);
}

Tensor CausalLM::forward(const ForwardBatch& batch, KVCache& cache) {
  const ModelConfig& c = config_;
  const int64_t T = static_cast<int64_t>(batch.token_ids.size());
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  validate(batch, cache, c.vocab_size);
  auto buffer = [&](Shape shape) { return empty(shape, DType::float32, device_); };
  auto upload = [&](const std::vector<int32_t>& v, Shape shape) {
    Tensor t = Tensor::cpu(shape, DType::int32);
    std::copy(v.begin(), v.end(), t.data<int32_t>());
    return to_device(t, device_);
  };
  const int64_t S = static_cast<int64_t>(batch.context_lens.size());
  AttentionMetadata meta;
  meta.query_start = upload(batch.query_start, {S + 1});
  meta.context_lens = upload(batch.context_lens, {S});
  meta.block_tables = upload(batch.block_tables, {S, batch.max_blocks});
  meta.positions = upload(batch.positions, {T});
  meta.slots = upload(batch.slots, {T});
  meta.max_context_len = *std::max_element(batch.context_lens.begin(), batch.context_lens.end());
  const Tensor ids = upload(batch.token_ids, {T});
  const Tensor logits_rows = upload(batch.logits_rows, {static_cast<int64_t>(batch.logits_rows.size())});
  Tensor cos, sin;
  rope_.tables(batch.positions, cos, sin);
  cos = to_device(cos, device_);
  sin = to_device(sin, device_);

  Tensor h = buffer({T, H});                     // the residual stream
  Tensor x = buffer({T, H});                     // normalized input of a block
  Tensor qkv = buffer({T, (Hq + 2 * Hkv) * D});  // rows of [q | k | v]
  Tensor q = buffer({T, Hq, D}), k = buffer({T, Hkv, D}), v = buffer({T, Hkv, D});
  Tensor attn = buffer({T, Hq, D});
  Tensor proj = buffer({T, H});
  Tensor gate_up = buffer({T, 2 * I});
  Tensor act = buffer({T, I});

  ops::embedding(weights_.embed_tokens, ids, h);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
    // Attention block: h += o_proj(attention(rope(norm(q)), rope(norm(k)), v))
    ops::rms_norm(h, w.input_layernorm, eps, x);
    ops::linear(x, w.qkv_proj, w.qkv_bias, qkv);
    Tensor* const parts[] = {&q, &k, &v};
    ops::split_columns(qkv, parts);
    if (c.qk_norm) {
      ops::rms_norm(q, w.q_norm, eps, q);
      ops::rms_norm(k, w.k_norm, eps, k);
    }
    ops::rope_(q, cos, sin);
    ops::rope_(k, cos, sin);
    ops::kv_cache_write(k, v, meta.slots, cache.layers[static_cast<size_t>(l)]);
    ops::paged_attention(q, cache.layers[static_cast<size_t>(l)], meta, scale,
                         c.sliding_window[static_cast<size_t>(l)], attention_, attn);
    ops::linear(attn.reshape({T, Hq * D}), w.o_proj, w.o_bias, proj);
    ops::add_(h, proj);
    // MLP block: h += down_proj(silu(gate_proj(x)) * up_proj(x)), x = norm(h)
    ops::rms_norm(h, w.post_attention_layernorm, eps, x);
    ops::linear(x, w.gate_up_proj, w.gate_up_bias, gate_up);
    ops::silu_mul(gate_up, act);
    ops::linear(act, w.down_proj, w.down_bias, proj);
    ops::add_(h, proj);
  }
  // Only the rows whose logits are wanted go through the final norm and the vocabulary projection.
  const int64_t R = static_cast<int64_t>(batch.logits_rows.size());
  Tensor last = buffer({R, H});
  ops::gather_rows(h, logits_rows, last);
  Tensor normed = buffer({R, H});
  ops::rms_norm(last, weights_.norm, eps, normed);
  Tensor logits = buffer({R, c.vocab_size});
  ops::linear(normed, weights_.lm_head, Tensor(), logits);
  return to_device(logits, Device{});
}

}  // namespace tfm

#include "tfm/model/weights.h"

#include <map>
#include <set>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/io/checkpoint.h"

namespace tfm {

std::vector<WeightSpec> expected_weights(const ModelConfig& c) {
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t q_dim = c.num_attention_heads * D, kv_dim = c.num_key_value_heads * D;
  std::vector<WeightSpec> w;
  w.push_back({"model.embed_tokens.weight", {c.vocab_size, H}});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    w.push_back({p + "input_layernorm.weight", {H}});
    for (const auto& [name, rows] : {std::pair{"q_proj", q_dim}, {"k_proj", kv_dim}, {"v_proj", kv_dim}}) {
      w.push_back({p + "self_attn." + name + ".weight", {rows, H}});
      if (c.qkv_bias) w.push_back({p + "self_attn." + name + ".bias", {rows}});
    }
    w.push_back({p + "self_attn.o_proj.weight", {H, q_dim}});
    if (c.o_bias) w.push_back({p + "self_attn.o_proj.bias", {H}});
    if (c.qk_norm) {
      w.push_back({p + "self_attn.q_norm.weight", {D}});
      w.push_back({p + "self_attn.k_norm.weight", {D}});
    }
    w.push_back({p + "post_attention_layernorm.weight", {H}});
    for (const auto& [name, shape] :
         {std::pair{"gate_proj", Shape{I, H}}, {"up_proj", Shape{I, H}}, {"down_proj", Shape{H, I}}}) {
      w.push_back({p + "mlp." + name + ".weight", shape});
      if (c.mlp_bias) w.push_back({p + "mlp." + name + ".bias", {shape[0]}});
    }
  }
  w.push_back({"model.norm.weight", {H}});
  if (!c.tie_word_embeddings) w.push_back({"lm_head.weight", {c.vocab_size, H}});
  return w;
}

namespace {

// float32 values of a stored tensor, rounded to the precision the model runs at.
Tensor to_float32(const Tensor& stored, DType precision, const std::string& where) {
  Tensor out = Tensor::cpu(stored.shape(), DType::float32);
  float* o = out.data<float>();
  const int64_t n = stored.numel();
  switch (stored.dtype()) {
    case DType::float32:
      std::copy_n(stored.data<float>(), n, o);
      break;
    case DType::bfloat16:
      for (int64_t i = 0; i < n; ++i) o[i] = bf16_to_float(stored.data<uint16_t>()[i]);
      break;
    case DType::float16:
      for (int64_t i = 0; i < n; ++i) o[i] = fp16_to_float(stored.data<uint16_t>()[i]);
      break;
    default:
      throw_error(where, " is stored as ", dtype_name(stored.dtype()), ", which tfm cannot load as weights");
  }
  if (precision == DType::bfloat16 && stored.dtype() != DType::bfloat16) {
    for (int64_t i = 0; i < n; ++i) o[i] = bf16_to_float(float_to_bf16(o[i]));
  } else if (precision == DType::float16 && stored.dtype() != DType::float16) {
    for (int64_t i = 0; i < n; ++i) o[i] = fp16_to_float(float_to_fp16(o[i]));
  }
  return out;
}

// Rows of several (rows_i, cols) tensors stacked into one (sum rows_i, cols).
Tensor stack_rows(const std::vector<Tensor>& parts) {
  int64_t rows = 0;
  for (const Tensor& p : parts) rows += p.size(0);
  Shape shape = parts[0].shape();
  shape[0] = rows;
  Tensor out = Tensor::cpu(shape, DType::float32);
  float* o = out.data<float>();
  for (const Tensor& p : parts) o = std::copy_n(p.data<float>(), p.numel(), o);
  return out;
}

bool ignored_on_load(const std::string& name) {
  // Old checkpoints stored the rotary frequencies; Transformers recomputes them and ignores these.
  return name.ends_with("rotary_emb.inv_freq");
}

}  // namespace

ModelWeights load_weights(const std::string& dir, const ModelConfig& config, DType dtype, Device device) {
  const Checkpoint checkpoint = Checkpoint::open(dir);
  const std::vector<WeightSpec> specs = expected_weights(config);
  std::set<std::string> expected;
  for (const WeightSpec& s : specs) expected.insert(s.name);
  for (const std::string& name : checkpoint.names()) {
    const bool tied_head = config.tie_word_embeddings && name == "lm_head.weight";
    if (!expected.count(name) && !tied_head && !ignored_on_load(name)) {
      throw_error(checkpoint.file_of(name), ": unexpected tensor ", name, " (not part of a ",
                  config.architecture_name, " with this config.json)");
    }
  }
  std::map<std::string, Tensor> host;
  for (const WeightSpec& s : specs) {
    const TensorInfo* info = checkpoint.find(s.name);
    if (!info) throw_error(dir, ": missing tensor ", s.name, " (", config.architecture_name, " needs it)");
    if (info->shape != s.shape) {
      throw_error(checkpoint.file_of(s.name), ": tensor ", s.name, " has shape ", shape_str(info->shape),
                  " but config.json implies ", shape_str(s.shape));
    }
    host[s.name] = to_float32(checkpoint.get(s.name), dtype, checkpoint.file_of(s.name) + ": " + s.name);
  }
  auto take = [&](const std::string& name) { return to_device(host.at(name), device); };
  auto take_optional = [&](const std::string& name) { return host.count(name) ? take(name) : Tensor(); };

  ModelWeights w;
  w.embed_tokens = take("model.embed_tokens.weight");
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights lw;
    lw.input_layernorm = take(p + "input_layernorm.weight");
    const std::string a = p + "self_attn.";
    lw.qkv_proj = to_device(stack_rows({host.at(a + "q_proj.weight"), host.at(a + "k_proj.weight"),
                                        host.at(a + "v_proj.weight")}),
                            device);
    if (config.qkv_bias) {
      lw.qkv_bias = to_device(
          stack_rows({host.at(a + "q_proj.bias"), host.at(a + "k_proj.bias"), host.at(a + "v_proj.bias")}),
          device);
    }
    lw.q_norm = take_optional(a + "q_norm.weight");
    lw.k_norm = take_optional(a + "k_norm.weight");
    lw.o_proj = take(a + "o_proj.weight");
    lw.o_bias = take_optional(a + "o_proj.bias");
    lw.post_attention_layernorm = take(p + "post_attention_layernorm.weight");
    const std::string m = p + "mlp.";
    lw.gate_up_proj =
        to_device(stack_rows({host.at(m + "gate_proj.weight"), host.at(m + "up_proj.weight")}), device);
    if (config.mlp_bias) {
      lw.gate_up_bias =
          to_device(stack_rows({host.at(m + "gate_proj.bias"), host.at(m + "up_proj.bias")}), device);
    }
    lw.down_proj = take(m + "down_proj.weight");
    lw.down_bias = take_optional(m + "down_proj.bias");
    w.layers.push_back(std::move(lw));
    for (auto it = host.lower_bound(p); it != host.end() && it->first.starts_with(p);) it = host.erase(it);
  }
  w.norm = take("model.norm.weight");
  w.lm_head = config.tie_word_embeddings ? w.embed_tokens : take("lm_head.weight");
  return w;
}

}  // namespace tfm

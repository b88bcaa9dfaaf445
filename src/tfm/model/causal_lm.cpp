#include "tfm/model/causal_lm.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <filesystem>
#include <utility>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/core/logging.h"
#include "tfm/core/floats.h"
#include "tfm/io/progress_bar.h"
#include "tfm/model/layers.h"
#include "tfm/model/rope.h"
#include "tfm/model/step_inputs.h"
#include "tfm/model/weights.h"
#include "tfm/ops/op_profile.h"

namespace tfm {
namespace {

static_assert(kIgnoreIndex == op::CrossEntropy::kIgnoreIndex, "the model's and the loss kernels' ignored label");

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
  bool device_graphs = true;

  // cos and sin of positions [0, rows) on the device, when the rope is not dynamic: a step gathers its rows.
  Tensor rope_cos, rope_sin;

  // A decode step of `rows` sequences captured as a device graph, with the buffers it reads and writes.
  struct DecodeGraph {
    StepInputs inputs;
    Tensor cos, sin, logits;
    std::unique_ptr<DeviceGraph> graph;
  };
  // By (rows, blocks per table); captured against the cache memory in graphs_cache (a graph holds the
  // addresses, so another cache at the same addresses serves as well).
  std::map<std::pair<int64_t, int64_t>, DecodeGraph> graphs;
  std::vector<const void*> graphs_cache;

  void resolve_kernels() {
    const KernelMode mode = training ? KernelMode::training : KernelMode::inference;
    kernels = resolve_layer_kernels(kernel_config, use_kernels, device.type, dtype, mode);
    if (!kernel_config.variant("Attention", device.type, mode)) kernels.variants["Attention"] = attention;
    graphs.clear();  // they replay the kernels they were captured with
  }

  // The device logits (R, vocab) in the model's dtype of one step. A decode step replays a device graph where
  // the device has them; the logits it returns are then the graph's buffer, valid until the next step.
  Tensor step(const ForwardBatch& batch, KVCache& cache, SavedActivations* saved, const EarlierIds& earlier = {}) {
    validate(batch, cache, config.vocab_size);
    check(static_cast<int64_t>(cache.layers.size()) == config.num_hidden_layers &&
              cache.layers[0].key.dtype() == dtype && cache.layers[0].key.device() == device,
          "forward: the KV cache was not made by this model (make_cache)");
    if (device_graphs && !ops::op_profile_enabled() && !saved && !rope.dynamic() && is_decode_batch(batch) &&
        static_cast<int64_t>(batch.token_ids.size()) <= kMaxGraphRows) {
      if (Tensor logits = replay_decode(batch, cache, earlier); logits.defined()) return logits;
    }
    StepInputs inputs = allocate_step_inputs(batch, device);
    upload_step_inputs(batch, inputs);
    take_earlier_ids(inputs.ids, earlier);
    Tensor cos, sin;
    step_rope(batch.positions, inputs.meta.positions, cos, sin);
    Tensor logits = tfm::empty({static_cast<int64_t>(batch.logits_rows.size()), config.vocab_size}, dtype, device);
    run_layers(inputs, cos, sin, cache, saved, logits);
    return logits;
  }

  static constexpr int64_t kMaxGraphRows = 256;

  // The graph of the batch's padded shape (captured on its first use, after one ordinary run that warms every
  // kernel and plan up) replayed on the batch; undefined when the device has no graphs.
  Tensor replay_decode(const ForwardBatch& batch, KVCache& cache, const EarlierIds& earlier) {
    const int64_t rows = std::bit_ceil(static_cast<uint64_t>(batch.token_ids.size()));
    const int64_t max_blocks = std::max<int64_t>(8, std::bit_ceil(static_cast<uint64_t>(batch.max_blocks)));
    const ForwardBatch padded = pad_decode_batch(batch, rows, max_blocks);
    ensure_rope_table(padded.positions);
    std::vector<const void*> memory;
    for (const LayerCache& layer : cache.layers) memory.insert(memory.end(), {layer.key.raw(), layer.value.raw()});
    if (graphs_cache != memory) {
      graphs.clear();
      graphs_cache = std::move(memory);
    }
    const int64_t R = static_cast<int64_t>(batch.logits_rows.size());
    auto found = graphs.find({rows, max_blocks});
    if (found != graphs.end()) {
      DecodeGraph& g = found->second;
      upload_step_inputs(padded, g.inputs);
      take_earlier_ids(g.inputs.ids, earlier);
      g.graph->replay();
      return g.logits.narrow(0, R);
    }
    DecodeGraph g;
    g.inputs = allocate_step_inputs(padded, device);
    g.inputs.meta.max_context_len = max_blocks * cache.block_size;
    g.logits = tfm::empty({rows, config.vocab_size}, dtype, device);
    upload_step_inputs(padded, g.inputs);
    take_earlier_ids(g.inputs.ids, earlier);
    auto work = [&] {
      gather_rope(padded.positions, g.inputs.meta.positions, g.cos, g.sin);
      run_layers(g.inputs, g.cos, g.sin, cache, nullptr, g.logits);
    };
    work();
    Backend* backend = find_backend(device.type);
    g.graph = backend->capture(device.index_or_zero(), work);
    if (!g.graph) {
      device_graphs = false;  // the device has none: later steps run as they are
      logging::log_once(logging::Level::info, device.str() + " has no device graphs: decode steps run kernel by kernel");
      return g.logits.narrow(0, R);
    }
    logging::log(logging::Level::debug, "captured the decode step of " + std::to_string(rows) +
                                            " sequences (block tables " + std::to_string(max_blocks) +
                                            " wide) as a device graph on " + device.str());
    logging::log_once(logging::Level::info, "decode steps run as device graphs on " + device.str());
    Tensor logits = g.logits.narrow(0, R);
    graphs.emplace(std::pair{rows, max_blocks}, std::move(g));
    return logits;
  }

  // Gives the rows of `ids` (T, on the device, uploaded) that wait for an earlier step's ids those ids: `ids`
  // becomes a gather from its own values followed by the earlier ones, in order after both on the device.
  void take_earlier_ids(const Tensor& ids, const EarlierIds& earlier) {
    if (earlier.rows.empty()) return;
    check(earlier.ids && earlier.rows.size() == earlier.from.size(), "forward: earlier ids without their step");
    const Tensor from = to_device(earlier.ids->on_device(), device);
    const int64_t T = ids.size(0), P = from.numel();
    std::vector<int32_t> index(static_cast<size_t>(T));
    std::iota(index.begin(), index.end(), 0);
    for (size_t i = 0; i < earlier.rows.size(); ++i) {
      check(earlier.rows[i] >= 0 && earlier.rows[i] < T && earlier.from[i] >= 0 && earlier.from[i] < P,
            "forward: row ", earlier.rows[i], " cannot take earlier id ", earlier.from[i], " (", T, " rows, ", P,
            " earlier ids)");
      index[static_cast<size_t>(earlier.rows[i])] = static_cast<int32_t>(T) + earlier.from[i];
    }
    const Tensor source = tfm::empty({T + P, 1}, DType::int32, device);
    copy(source.narrow(0, T), ids);
    copy(source.narrow(T, P), from);
    const Tensor rows = tfm::empty({T}, DType::int32, device);
    copy_from_host(rows, index.data());
    Tensor out = ids.reshape({T, 1});
    ops::gather_rows(source, rows, out);
  }

  // Makes the device rope table cover `positions` (growing it to a power of two past the largest).
  void ensure_rope_table(const std::vector<int32_t>& positions) {
    const int64_t needed = positions.empty() ? 1 : *std::max_element(positions.begin(), positions.end()) + 1;
    if (rope_cos.defined() && rope_cos.size(0) >= needed) return;
    const int64_t rows = std::max<int64_t>(4096, std::bit_ceil(static_cast<uint64_t>(needed)));
    std::vector<int32_t> all(static_cast<size_t>(rows));
    std::iota(all.begin(), all.end(), 0);
    Tensor cos, sin;
    rope.tables(all, cos, sin);
    rope_cos = upload_as(cos, dtype, device);
    rope_sin = upload_as(sin, dtype, device);
    graphs.clear();  // they read the old table
  }

  // cos and sin (T, rot) of `positions` (on the host; `device_positions` the same on the device) from the
  // table, into `cos` and `sin` (allocated when undefined).
  void gather_rope(const std::vector<int32_t>& positions, const Tensor& device_positions, Tensor& cos, Tensor& sin) {
    ensure_rope_table(positions);
    const Shape shape{static_cast<int64_t>(positions.size()), rope.rot_dim()};
    if (!cos.defined()) cos = tfm::empty(shape, dtype, device);
    if (!sin.defined()) sin = tfm::empty(shape, dtype, device);
    ops::gather_rows(rope_cos, device_positions, cos);
    ops::gather_rows(rope_sin, device_positions, sin);
  }
  // A step's cos and sin (T, rot) of `positions` (`device_positions` the same on the device): gathered from
  // the device tables, or where the rope is dynamic made on the host in float32 and rounded to the dtype as
  // Transformers' rotary embedding returns them.
  void step_rope(const std::vector<int32_t>& positions, const Tensor& device_positions, Tensor& cos,
                 Tensor& sin) {
    if (!rope.dynamic()) {
      gather_rope(positions, device_positions, cos, sin);
      return;
    }
    rope.tables(positions, cos, sin);
    cos = upload_as(cos, dtype, device);
    sin = upload_as(sin, dtype, device);
  }

  std::vector<LinearModule> linear_modules() {
    std::vector<LinearModule> out;
    const int64_t D = config.head_dim, I = config.intermediate_size;
    for (size_t l = 0; l < layers.size(); ++l) {
      const std::string a = "model.layers." + std::to_string(l) + ".self_attn.",
                        mlp = "model.layers." + std::to_string(l) + ".mlp.";
      DecoderLayer& layer = layers[l];
      out.push_back({&layer.self_attn().qkv_proj(),
                     {{a + "q_proj", config.num_attention_heads * D},
                      {a + "k_proj", config.num_key_value_heads * D},
                      {a + "v_proj", config.num_key_value_heads * D}}});
      out.push_back({&layer.self_attn().o_proj(), {{a + "o_proj", config.hidden_size}}});
      out.push_back({&layer.mlp().gate_up_proj(), {{mlp + "gate_proj", I}, {mlp + "up_proj", I}}});
      out.push_back({&layer.mlp().down_proj(), {{mlp + "down_proj", config.hidden_size}}});
    }
    return out;
  }

  // A training batch's loss and, with `grads`, its backward. With `recompute`, the forward keeps only each
  // layer's input and the backward runs each layer's forward again before its backward (activation
  // checkpointing): one more forward for a layer's activations instead of all of them.
  StepLoss train_step(const std::vector<const TrainingExample*>& batch, float grad_scale, Gradients* grads,
                      bool recompute) {
    check(!batch.empty(), "a training step needs at least one sequence");
    // A cache just large enough for the batch: every sequence starts at position 0 and attends to itself.
    int64_t blocks = 0;
    for (const TrainingExample* s : batch) {
      check(!s->input_ids.empty() && s->labels.size() == s->input_ids.size(), "a training sequence of ",
            s->input_ids.size(), " tokens has ", s->labels.size(), " labels");
      blocks += blocks_for(static_cast<int64_t>(s->input_ids.size()), kDefaultBlockSize);
    }
    KVCache cache = KVCache::create(config, blocks, kDefaultBlockSize, dtype, device);
    BatchBuilder builder(cache);
    std::vector<int32_t> shifted;  // each row's target: the next token's label, -100 for a sequence's last
    StepLoss result;
    for (const TrainingExample* s : batch) {
      SequenceCache seq;
      builder.add(seq, std::vector<int64_t>(s->input_ids.begin(), s->input_ids.end()), Logits::all);
      for (size_t i = 0; i < s->labels.size(); ++i) {
        const int32_t label = i + 1 < s->labels.size() ? s->labels[i + 1] : kIgnoreIndex;
        // Checked here, on the host: a device kernel would read the logit of any label it is given.
        check(label == kIgnoreIndex || (label >= 0 && label < config.vocab_size), "a training label is ", label,
              ": labels are token ids below the vocabulary size ", config.vocab_size, ", or ", kIgnoreIndex,
              " for a position without a loss");
        shifted.push_back(label);
        result.items += label != kIgnoreIndex;
      }
    }
    const ForwardBatch fb = builder.finish();
    validate(fb, cache, config.vocab_size);
    StepInputs inputs = allocate_step_inputs(fb, device);
    upload_step_inputs(fb, inputs);
    Tensor cos, sin;
    step_rope(fb.positions, inputs.meta.positions, cos, sin);
    Tensor neg_sin = tfm::empty(sin.shape(), dtype, device);  // -sin rotates back: the backward's rope
    const op::ScaledColumns negated{neg_sin, 0, sin, 0, sin.size(1), -1.f};
    ops::add_scaled_columns_({&negated, 1}, false);

    SavedActivations saved;
    const StepContext ctx{device, dtype, inputs.meta, cos, sin, kernels, grads ? &saved : nullptr};
    const StepContext unsaved{device, dtype, inputs.meta, cos, sin, kernels, nullptr};
    Tensor h = embed_tokens.forward(inputs.ids, ctx), pending;
    std::vector<std::pair<Tensor, Tensor>> layer_inputs;  // (h, pending) before each layer, with recompute
    for (size_t l = 0; l < layers.size(); ++l) {
      if (recompute && grads) layer_inputs.emplace_back(clone(h), pending.defined() ? clone(pending) : Tensor());
      layers[l].forward(h, pending, cache.layers[l], recompute ? unsaved : ctx);
    }
    Tensor logits = lm_head.forward(norm.forward_residual(h, pending, ctx), ctx);
    Tensor labels = Tensor::cpu({static_cast<int64_t>(shifted.size())}, DType::int32);
    std::copy(shifted.begin(), shifted.end(), labels.data<int32_t>());
    labels = to_device(labels, device);
    Tensor loss = tfm::empty({1}, DType::float32, device);
    ops::cross_entropy(logits, labels, grad_scale, loss, logits);  // the logits become their gradient
    result.loss_sum = to_device(loss, Device{}).data<float>()[0];
    if (!grads) return result;

    // Every sequence starts at position 0, so the longest context is the longest sequence.
    const BackwardContext back{device, dtype,   saved, inputs.meta.query_start, inputs.meta.max_context_len,
                               cos,    neg_sin, *grads};
    Tensor grad = norm.backward(lm_head.backward(logits, back), back);  // of the last residual add's sum
    for (size_t l = layers.size(); l-- > 0;) {
      if (!recompute) {
        layers[l].backward(grad, back);
        continue;
      }
      SavedActivations layer_saved;
      auto& [layer_h, layer_pending] = layer_inputs[l];
      layers[l].forward(layer_h, layer_pending, cache.layers[l],
                        StepContext{device, dtype, inputs.meta, cos, sin, kernels, &layer_saved});
      layers[l].backward(grad, BackwardContext{device, dtype, layer_saved, inputs.meta.query_start,
                                               inputs.meta.max_context_len, cos, neg_sin, *grads});
    }
    embed_tokens.backward(grad, back);
    return result;
  }

  // Embedding, the decoder layers, the final norm and the head, for the rows in `inputs`; the logits of the
  // wanted rows into `logits`. Device work only (no copy to or from the host), so that a graph can hold it.
  void run_layers(const StepInputs& inputs, const Tensor& cos, const Tensor& sin, KVCache& cache,
                  SavedActivations* saved, Tensor& logits) {
    const StepContext ctx{device, dtype, inputs.meta, cos, sin, kernels, saved};
    Tensor h = embed_tokens.forward(inputs.ids, ctx);  // the residual stream (T, hidden)
    Tensor pending;                                    // a block's output not yet added to h
    for (size_t l = 0; l < layers.size(); ++l) layers[l].forward(h, pending, cache.layers[l], ctx);
    // Only the rows whose logits are wanted go through the last residual add, the final norm and the head.
    const int64_t R = inputs.logits_rows.size(0);
    Tensor last = ctx.empty({R, h.size(1)}), last_pending = ctx.empty({R, h.size(1)});
    ops::gather_rows(h, inputs.logits_rows, last);
    ops::gather_rows(pending, inputs.logits_rows, last_pending);
    const Tensor normed = norm.forward_residual(last, last_pending, ctx);
    lm_head.forward_into(normed, logits, ctx);
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
                                             bytes,
                                             options.device_graphs,
                                             Tensor(),
                                             Tensor(),
                                             {},
                                             {}});
  impl->resolve_kernels();
  if (!impl->rope.dynamic()) impl->ensure_rope_table({0});  // the table a step's cos and sin come from
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
  for (const LinearModule& m : impl_->linear_modules()) m.linear->train(mode);
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

namespace {

// A step's logits on the host in float32, as generate() reads them: .float()
Tensor host_float32(const Tensor& device_logits) {
  const Tensor logits = to_device(device_logits, Device{});
  Tensor out = Tensor::cpu(logits.shape(), DType::float32);
  ops::cast(logits, out);
  return out;
}

}  // namespace

Tensor CausalLM::forward(const ForwardBatch& batch, KVCache& cache, SavedActivations* saved) {
  return host_float32(impl_->step(batch, cache, saved));
}

StepIds::StepIds(Tensor ids)
    : device_(std::move(ids)),
      host_(Tensor::cpu(device_.shape(), DType::int32)),
      copy_(copy_to_host_queued(device_, host_.raw())) {}
StepIds::StepIds(StepIds&&) noexcept = default;
StepIds& StepIds::operator=(StepIds&&) noexcept = default;
StepIds::~StepIds() = default;

std::vector<int64_t> StepIds::read() {
  copy_->wait();
  return std::vector<int64_t>(host_.data<int32_t>(), host_.data<int32_t>() + host_.numel());
}

namespace {

// One id per row of `logits`, chosen by `choose(logits, ids)` on the logits' device when `runs_there`, else on
// a host copy: only the ids come back.
template <typename Choose>
StepIds choose_ids(Tensor logits, bool runs_there, Choose choose) {
  if (!runs_there) logits = to_device(logits, Device{});
  Tensor ids = tfm::empty({logits.size(0)}, DType::int32, logits.device());
  choose(logits, ids);
  return StepIds(std::move(ids));
}

int32_t float_bits(float v) {
  return std::bit_cast<int32_t>(v);
}

// op::SampleRows' inputs in one int32 buffer (one upload): each row's settings, then the penalties' entries.
// Packed, and so checked, before the step changes the cache.
struct PackedSampling {
  std::vector<int32_t> words;
  int64_t rows = 0, penalties = 0;
};
PackedSampling pack_sampling(const std::vector<RowSampling>& rows) {
  PackedSampling out;
  out.rows = static_cast<int64_t>(rows.size());
  out.words.resize(static_cast<size_t>(out.rows * kSampleSettingsWords));
  std::vector<int32_t> penalties;
  for (size_t r = 0; r < rows.size(); ++r) {
    const RowSampling& row = rows[r];
    check(row.top_k >= 0 && row.top_k <= std::numeric_limits<int32_t>::max(), "sample: top_k ", row.top_k,
          " is out of range");
    const auto begin = static_cast<int32_t>(penalties.size() / 2);
    for (const auto& [token, amount] : row.penalized) penalties.insert(penalties.end(), {token, float_bits(amount)});
    const SampleSettings s{row.temperature,
                           static_cast<int32_t>(row.top_k),
                           row.top_p,
                           row.min_p,
                           row.repetition_penalty,
                           static_cast<uint32_t>(row.key),
                           static_cast<uint32_t>(row.key >> 32),
                           begin,
                           static_cast<int32_t>(penalties.size() / 2)};
    std::memcpy(out.words.data() + r * kSampleSettingsWords, &s, sizeof s);
  }
  if (penalties.empty()) penalties = {-1, 0};  // no entry any row reads; the tensor needs an element
  out.penalties = static_cast<int64_t>(penalties.size() / 2);
  out.words.insert(out.words.end(), penalties.begin(), penalties.end());
  return out;
}

// The token of each row of `logits` chosen on their device as `packed` says (op::SampleRows), or on a host copy
// where the device has no such kernel.
StepIds sample_ids(const Tensor& logits, const PackedSampling& packed) {
  const bool runs_there = ops::sample_rows_runs_on(logits.device().type, logits.dtype());
  const Tensor inputs = tfm::empty({static_cast<int64_t>(packed.words.size())}, DType::int32,
                                   runs_there ? logits.device() : Device{});
  copy_from_host(inputs, packed.words.data());
  const int64_t R = packed.rows, N = packed.penalties;
  const Tensor settings = inputs.narrow(0, R * kSampleSettingsWords).reshape({R, kSampleSettingsWords});
  const Tensor penalty_view = inputs.narrow(R * kSampleSettingsWords, 2 * N).reshape({N, 2});
  return choose_ids(logits, runs_there,
                    [&](const Tensor& x, Tensor& ids) { ops::sample_rows(x, settings, penalty_view, ids); });
}

// Checked before a step changes the cache: one row of sampling settings a row of logits.
void check_settings_rows(size_t settings, const ForwardBatch& batch) {
  check(settings == batch.logits_rows.size(), "sample: ", settings, " rows of settings for ",
        batch.logits_rows.size(), " rows of logits");
}

// Rows `rows` of `x` (R, C), on x's device.
Tensor pick_rows(const Tensor& x, const std::vector<int32_t>& rows) {
  const auto n = static_cast<int64_t>(rows.size());
  const Tensor index = tfm::empty({n}, DType::int32, x.device());
  copy_from_host(index, rows.data());
  Tensor out = tfm::empty({n, x.size(1)}, x.dtype(), x.device());
  ops::gather_rows(x, index, out);
  return out;
}

}  // namespace

StepIds CausalLM::queue_greedy(const ForwardBatch& batch, KVCache& cache, const EarlierIds& earlier) {
  const Tensor logits = impl_->step(batch, cache, nullptr, earlier);
  return choose_ids(logits, ops::argmax_rows_runs_on(logits.device().type, logits.dtype()),
                    [](const Tensor& x, Tensor& ids) { ops::argmax_rows(x, ids); });
}

StepIds CausalLM::queue_sample(const ForwardBatch& batch, KVCache& cache, const std::vector<RowSampling>& rows,
                               const EarlierIds& earlier) {
  check_settings_rows(rows.size(), batch);
  const PackedSampling packed = pack_sampling(rows);
  return sample_ids(impl_->step(batch, cache, nullptr, earlier), packed);
}

CausalLM::SplitStep CausalLM::split_step(const ForwardBatch& batch, KVCache& cache,
                                         const std::vector<std::optional<RowSampling>>& rows) {
  check_settings_rows(rows.size(), batch);
  std::vector<int32_t> device_rows, host_rows;
  std::vector<RowSampling> settings;
  for (size_t r = 0; r < rows.size(); ++r) {
    (rows[r] ? device_rows : host_rows).push_back(static_cast<int32_t>(r));
    if (rows[r]) settings.push_back(*rows[r]);
  }
  const PackedSampling packed = pack_sampling(settings);
  const Tensor logits = impl_->step(batch, cache, nullptr);
  SplitStep out;
  if (!device_rows.empty()) out.chosen = sample_ids(host_rows.empty() ? logits : pick_rows(logits, device_rows), packed);
  if (!host_rows.empty()) out.host_logits = host_float32(device_rows.empty() ? logits : pick_rows(logits, host_rows));
  return out;
}

StepLoss CausalLM::forward_backward(const std::vector<const TrainingExample*>& batch, float grad_scale,
                                   Gradients& grads, bool recompute_layers) {
  return impl_->train_step(batch, grad_scale, &grads, recompute_layers);
}

StepLoss CausalLM::loss(const std::vector<const TrainingExample*>& batch) {
  return impl_->train_step(batch, 0.f, nullptr, false);
}

std::vector<std::pair<std::string, Tensor>> Parameter::checkpoint_tensors(const Tensor& values) const {
  check(values.shape() == value.shape(), name, ": ", values.str(), " is not of the parameter's shape");
  std::vector<std::pair<std::string, Tensor>> out;
  int64_t row = 0;
  for (const auto& [checkpoint_name, rows] : checkpoint_rows) {
    out.emplace_back(checkpoint_name, values.narrow(row, rows));
    row += rows;
  }
  return out;
}

std::vector<Parameter> CausalLM::parameters() const {
  std::vector<Parameter> params;
  auto add = [&](const std::string& name, const Tensor& value) {
    params.push_back({name + ".weight", value, {{name + ".weight", value.size(0)}}});
  };
  auto add_linear = [&](const LinearModule& m) {
    const auto* dense = dynamic_cast<const DenseWeight*>(&m.linear->weight());
    check(dense != nullptr, m.linear->name(), " holds no dense weight to train");
    Parameter weight{m.linear->name() + ".weight", dense->tensor(), {}};
    Parameter bias{m.linear->name() + ".bias", m.linear->bias(), {}};
    for (const auto& [module, rows] : m.modules) {
      weight.checkpoint_rows.emplace_back(module + ".weight", rows);
      bias.checkpoint_rows.emplace_back(module + ".bias", rows);
    }
    params.push_back(std::move(weight));
    if (bias.value.defined()) params.push_back(std::move(bias));
  };
  Impl& m = *impl_;
  add("model.embed_tokens", m.embed_tokens.table());
  const std::vector<LinearModule> linears = m.linear_modules();  // four per layer: qkv, o, gate_up, down
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    DecoderLayer& layer = m.layers[l];
    add(p + "input_layernorm", layer.input_layernorm().weight());
    add_linear(linears[4 * l]);
    add_linear(linears[4 * l + 1]);
    if (layer.self_attn().q_norm()) add(p + "self_attn.q_norm", layer.self_attn().q_norm()->weight());
    if (layer.self_attn().k_norm()) add(p + "self_attn.k_norm", layer.self_attn().k_norm()->weight());
    add(p + "post_attention_layernorm", layer.post_attention_layernorm().weight());
    add_linear(linears[4 * l + 2]);
    add_linear(linears[4 * l + 3]);
  }
  add("model.norm", m.norm.weight());
  if (!m.config.tie_word_embeddings) add_linear({&m.lm_head, {{"lm_head", m.config.vocab_size}}});
  return params;
}

std::vector<LinearModule> CausalLM::linear_modules() {
  return impl_->linear_modules();
}

void CausalLM::set_device_graphs(bool enabled) {
  impl_->device_graphs = enabled;
  impl_->graphs.clear();
}

bool CausalLM::device_graphs() const {
  return impl_->device_graphs;
}

}  // namespace tfm

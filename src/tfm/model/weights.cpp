#include "tfm/model/weights.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <cmath>
#include <set>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/core/floats.h"
#include "tfm/core/parallel.h"
#include "tfm/io/checkpoint.h"
#include "tfm/io/progress_bar.h"

namespace tfm {

std::vector<WeightSpec> expected_weights(const ModelConfig& c) {
  const int64_t H = c.hidden_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t q_dim = checked_mul(c.num_attention_heads, D, "config.json: num_attention_heads * head_dim");
  const int64_t kv_dim = checked_mul(c.num_key_value_heads, D, "config.json: num_key_value_heads * head_dim");
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

bool ignored_on_load(const std::string& name) {
  // Old checkpoints stored the rotary frequencies; Transformers recomputes them and ignores these.
  return name.ends_with("rotary_emb.inv_freq");
}

bool is_float_dtype(DType d) {
  return std::find(std::begin(kComputeDTypes), std::end(kComputeDTypes), d) != std::end(kComputeDTypes);
}

// Weights share device allocations of this size; each starts at a multiple of kAlignBytes.
constexpr size_t kBlockBytes = size_t{256} << 20;
constexpr size_t kAlignBytes = 256;
size_t aligned(size_t bytes) {
  return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
}

// Elements converted per upload from another dtype: the mapping's pages of one chunk are in memory at a time.
constexpr int64_t kChunkElements = int64_t{32} << 20;

// Whether `n` elements of `dtype` at `data` are all finite: NaN or inf in a weight gives NaN logits later,
// far from the cause.
bool all_finite(const void* data, DType dtype, int64_t n) {
  return visit_float(dtype, [&]<typename T>() {
    const T* v = static_cast<const T*>(data);
    bool finite = true;
    for (int64_t i = 0; i < n; ++i) finite &= std::isfinite(to_float(v[i]));
    return finite;
  });
}

// The layers the checkpoint holds: one past the largest N of its "model.layers.N." names.
int64_t checkpoint_layers(const Checkpoint& checkpoint) {
  constexpr std::string_view kPrefix = "model.layers.";
  int64_t layers = 0;
  for (const std::string& name : checkpoint.names()) {
    if (!name.starts_with(kPrefix)) continue;
    int64_t index = 0;
    const char* digits = name.data() + kPrefix.size();
    const auto [end, ec] = std::from_chars(digits, name.data() + name.size(), index);
    if (ec == std::errc() && end != digits && *end == '.') layers = std::max(layers, index + 1);
  }
  return layers;
}

// `n` elements of dtype `from` at `src` as dtype `to` at `dst`, rounding to nearest even.
void convert(const void* src, DType from, void* dst, DType to, int64_t n) {
  visit_float(from, [&]<typename In>() {
    visit_float(to, [&]<typename Out>() {
      const In* in = static_cast<const In*>(src);
      Out* out = static_cast<Out*>(dst);
      parallel_for(n, {.enabled = n > 65536}, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] = from_float<Out>(to_float(in[i]));
      });
    });
  });
}

}  // namespace

struct WeightLoader::State {
  Checkpoint checkpoint;
  DType dtype;
  Device device;
  std::set<std::string> expected;
  io::ProgressBar progress;
  size_t remaining;  // bytes of the weights on the device not yet handed out
  Tensor block{};    // the arena block handed out from
  size_t block_used = 0;

  // Device memory for one weight. Weights share blocks of up to kBlockBytes, handed out in order: a few
  // allocations for a whole model rather than one per tensor, each a driver call that a caching allocator also
  // rounds up. The cpu allocates per tensor (its weights are mostly views of the file anyway).
  Tensor allocate(const Shape& shape) {
    const size_t bytes = aligned(shape_bytes(shape, dtype));
    remaining -= std::min(remaining, bytes);
    if (device.type == DeviceType::cpu || bytes > kBlockBytes) return empty(shape, dtype, device);
    if (!block.defined() || block_used + bytes > static_cast<size_t>(block.nbytes())) {
      const size_t block_bytes = std::min(kBlockBytes, bytes + remaining);
      block = empty({static_cast<int64_t>(block_bytes / dtype_size(dtype))}, dtype, device);
      block_used = 0;
    }
    Tensor t(block.storage(), shape, dtype, static_cast<int64_t>(block_used / dtype_size(dtype)));
    block_used += bytes;
    return t;
  }

  // The values of tensor `name` (`stored` views them in the file mapping) into `dst`, a device tensor or view of
  // its shape. In the model's dtype they are read from the file straight into the device's transfer buffers,
  // never touching the mapping; in another they are converted from the mapping on their way, a chunk at a
  // time, each chunk's pages released once used.
  void upload(const std::string& name, const Tensor& stored, const Tensor& dst) {
    // Every piece is checked while it is in the cache from being read or converted.
    auto check_finite = [&](const void* values, size_t bytes) {
      check(all_finite(values, dtype, static_cast<int64_t>(bytes / dtype_size(dtype))),
            checkpoint.file_of(name), ": tensor ", name, " holds NaN or infinite values",
            stored.dtype() == dtype ? "" : " as " + std::string(dtype_name(dtype)));
    };
    if (stored.dtype() == dtype) {
      copy_from_reader(dst, [&](void* out, size_t offset, size_t bytes) {
        checkpoint.read(name, offset, out, bytes);
        check_finite(out, bytes);
      });
      return;
    }
    const int64_t n = stored.numel();
    const Tensor flat = dst.reshape({n});
    const size_t in_size = dtype_size(stored.dtype()), out_size = dtype_size(dtype);
    for (int64_t begin = 0; begin < n; begin += kChunkElements) {
      const int64_t count = std::min(kChunkElements, n - begin);
      const char* src = static_cast<const char*>(stored.raw()) + begin * in_size;
      copy_from_reader(flat.narrow(begin, count), [&](void* out, size_t offset, size_t bytes) {
        convert(src + offset / out_size * in_size, stored.dtype(), out, dtype, static_cast<int64_t>(bytes / out_size));
        check_finite(out, bytes);
      });
      checkpoint.release(name, static_cast<size_t>(begin) * in_size, static_cast<size_t>(begin + count) * in_size);
    }
  }

  Tensor stored(const std::string& name) {
    check(expected.count(name), "weights: ", name, " is not a tensor this model has");
    const Tensor t = checkpoint.get(name);
    check(is_float_dtype(t.dtype()), checkpoint.file_of(name), ": ", name, " is stored as ", dtype_name(t.dtype()),
          ", which tfm cannot load as weights (float32, bfloat16 and float16 can be)");
    return t;
  }

};

WeightLoader::WeightLoader(const std::string& dir, const ModelConfig& config, DType dtype, Device device,
                           bool progress) {
  Checkpoint checkpoint = Checkpoint::open(dir);
  // Before anything is sized by the layer count: a config.json that claims more layers than the checkpoint
  // has would otherwise list (and allocate for) every one of them first.
  const int64_t layers = checkpoint_layers(checkpoint);
  check(config.num_hidden_layers <= layers, dir, ": config.json has num_hidden_layers ",
        config.num_hidden_layers, ", but the checkpoint holds ",
        layers == 0 ? "no layers" : "layers 0 to " + std::to_string(layers - 1));
  const std::vector<WeightSpec> specs = expected_weights(config);
  std::set<std::string> expected;
  for (const WeightSpec& s : specs) expected.insert(s.name);
  for (const std::string& name : checkpoint.names()) {
    const bool tied_head = config.tie_word_embeddings && name == "lm_head.weight";
    if (!expected.count(name) && !tied_head && !ignored_on_load(name)) {
      throw_error(checkpoint.file_of(name), ": unexpected tensor ", name, " (not part of a ", config.architecture_name,
                  " with this config.json)");
    }
  }
  for (const WeightSpec& s : specs) {
    const TensorInfo* info = checkpoint.find(s.name);
    if (!info) throw_error(dir, ": missing tensor ", s.name, " (", config.architecture_name, " needs it)");
    if (info->shape != s.shape) {
      throw_error(checkpoint.file_of(s.name), ": tensor ", s.name, " has shape ", shape_str(info->shape),
                  " but config.json implies ", shape_str(s.shape));
    }
  }
  size_t total = 0;
  for (const WeightSpec& s : specs) total += aligned(shape_bytes(s.shape, dtype));
  state_.reset(new State{std::move(checkpoint), dtype, device, std::move(expected),
                         io::ProgressBar("Loading weights", static_cast<int64_t>(specs.size()), 0, progress,
                                         io::ProgressUnit::items, /*delay_s=*/1.0),
                         total});
}

WeightLoader::~WeightLoader() = default;

bool WeightLoader::has(const std::string& name) const {
  return state_->expected.count(name) > 0;
}

Tensor WeightLoader::take(const std::string& name) {
  const Tensor stored = state_->stored(name);
  const bool view = state_->device.type == DeviceType::cpu && stored.dtype() == state_->dtype;
  Tensor out = view ? stored : state_->allocate(stored.shape());
  if (!view) state_->upload(name, stored, out);
  state_->progress.update(1);
  return out;
}

Tensor WeightLoader::take_rows(const std::vector<std::string>& names) {
  std::vector<Tensor> parts;
  int64_t rows = 0;
  for (const std::string& name : names) {
    parts.push_back(state_->stored(name));
    rows += parts.back().size(0);
  }
  Shape shape = parts[0].shape();
  shape[0] = rows;
  Tensor out = state_->allocate(shape);
  int64_t row = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    state_->upload(names[i], parts[i], out.narrow(row, parts[i].size(0)));
    row += parts[i].size(0);
    state_->progress.update(1);
  }
  return out;
}

void copy_model_files_but_weights(const std::string& from, const std::string& to) {
  namespace fs = std::filesystem;
  for (const fs::directory_entry& e : fs::directory_iterator(from)) {
    const std::string name = e.path().filename().string();
    const bool weights =
        name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json") || name.ends_with(".bin");
    if (e.is_regular_file() && !weights)
      fs::copy_file(e.path(), fs::path(to) / name, fs::copy_options::overwrite_existing);
  }
}

}  // namespace tfm

#include "tfm/model/lora.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/core/floats.h"
#include "tfm/io/safetensors.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

// A host tensor of any float dtype as `dtype` on `device`.
Tensor placed_as(const Tensor& host, DType dtype, Device device) {
  Tensor converted = Tensor::cpu(host.shape(), dtype);
  ops::cast(host, converted);
  return to_device(converted, device);
}

// A device tensor's values as float32 on the host (a copy).
Tensor host_floats(const Tensor& t) {
  Tensor out = Tensor::cpu(t.shape(), DType::float32);
  ops::cast(to_device(t, Device{}), out);
  return out;
}

// The adapters `config` asks for, by Linear, without their tensors.
struct PlannedLinear {
  Linear* linear;
  std::vector<LoraAdapter> adapters;
};

std::vector<PlannedLinear> plan(CausalLM& model, const LoraConfig& config) {
  std::vector<PlannedLinear> out;
  for (const LinearModule& m : model.linear_modules()) {
    check(dynamic_cast<const LoraWeight*>(&m.linear->weight()) == nullptr, m.linear->name(),
          " already has LoRA adapters (merge them first)");
    PlannedLinear p{m.linear, {}};
    int64_t row = 0;
    for (const auto& [module, rows] : m.modules) {
      if (config.targets(module))
        p.adapters.push_back({module, row, rows, {}, {}, config.scaling_of(module)});
      row += rows;
    }
    if (!p.adapters.empty()) out.push_back(std::move(p));
  }
  if (out.empty())
    throw_error("LoRA: target_modules ", json::dump(config.to_json().at("target_modules")),
                " matches no linear module of the model");
  return out;
}

// Calls f(module, 'A' or 'B', tensor) for a Linear's adapter tensors in the order the model's adapter buffer
// holds them (install) and the optimizer gets them (lora_tensors): its A's one after another, then its B's.
// The A's are then the rows of one matrix, LoraWeight's stacked A, and their gradients in the optimizer's
// arena those of one too.
template <typename Adapters, typename F>
void in_buffer_order(Adapters& adapters, F f) {
  for (const char which : {'A', 'B'})
    for (auto& a : adapters) f(a.module, which, which == 'A' ? a.a : a.b);
}

// Moves every adapter tensor of the model into one buffer of the model's dtype, at arena_offsets in
// in_buffer_order: LoraWeight stacks its A's without a copy of its own, the optimizer's step over them all is
// one launch, and the backward writes the A gradients in place.
void install(CausalLM& model, std::vector<PlannedLinear> planned, const LoraConfig& config, uint64_t seed) {
  std::vector<Tensor*> tensors;
  for (PlannedLinear& p : planned)
    in_buffer_order(p.adapters, [&](const std::string&, char, Tensor& t) { tensors.push_back(&t); });
  std::vector<int64_t> numels;
  for (const Tensor* t : tensors) numels.push_back(t->numel());
  const std::vector<int64_t> offsets = arena_offsets(numels);
  const Tensor buffer = zeros({offsets.back()}, model.dtype(), model.device());
  for (size_t i = 0; i < tensors.size(); ++i) {
    Tensor view = buffer.narrow(offsets[i], numels[i]).reshape(tensors[i]->shape());
    ops::cast(*tensors[i], view);
    *tensors[i] = view;
  }
  for (size_t i = 0; i < planned.size(); ++i) {
    Linear& linear = *planned[i].linear;
    auto weight = std::make_unique<LoraWeight>(linear.replace_weight(nullptr), std::move(planned[i].adapters),
                                               static_cast<float>(config.lora_dropout), seed + i);
    weight->train(model.training());
    linear.replace_weight(std::move(weight));
  }
}

// Each LoraWeight of the model with its Linear.
std::vector<std::pair<Linear*, const LoraWeight*>> lora_weights(CausalLM& model) {
  std::vector<std::pair<Linear*, const LoraWeight*>> out;
  for (const LinearModule& m : model.linear_modules())
    if (const auto* w = dynamic_cast<const LoraWeight*>(&m.linear->weight())) out.emplace_back(m.linear, w);
  return out;
}

// `parts`, matrices of one width, as one matrix of their rows in order where each lies right after the one
// before it; an undefined tensor where they do not, or one of them is undefined.
Tensor rows_in_place(const std::vector<Tensor>& parts) {
  const Tensor& first = parts.front();
  if (!first.defined() || !first.is_contiguous()) return Tensor();
  int64_t rows = first.size(0);
  for (size_t i = 1; i < parts.size(); ++i) {
    if (!parts[i].lies_right_after(parts[i - 1]) || parts[i].size(1) != first.size(1)) return Tensor();
    rows += parts[i].size(0);
  }
  return Tensor(first.storage(), {rows, first.size(1)}, first.dtype(), first.offset());
}

// PEFT inserts the adapter's name in memory ("lora_A.default.weight"); saved files have none.
std::string without_adapter_name(const std::string& key) {
  static const std::regex in_memory(R"((\.lora_[AB])\.default(\.weight)$)");
  return std::regex_replace(key, in_memory, "$1$2");
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  check(out.good(), "cannot write ", path);
}

}  // namespace

std::string lora_key(const std::string& module, char which) {
  return "base_model.model." + module + ".lora_" + which + ".weight";
}

LoraWeight::LoraWeight(std::unique_ptr<LinearWeight> base, std::vector<LoraAdapter> adapters, float dropout,
                       uint64_t seed)
    : base_(std::move(base)), adapters_(std::move(adapters)), dropout_(dropout), seed_(seed) {
  for (const LoraAdapter& a : adapters_) {
    check(a.a.dim() == 2 && a.a.size(1) == base_->in_features() && a.b.dim() == 2 && a.b.size(0) == a.rows &&
              a.b.size(1) == a.a.size(0) && a.row + a.rows <= base_->out_features(),
          "LoRA adapter of ", a.module, ": A ", a.a.str(), " and B ", a.b.str(), " do not fit rows [", a.row,
          ", ", a.row + a.rows, ") of a ", base_->out_features(), "x", base_->in_features(), " weight");
  }
  if (adapters_.empty()) return;
  int64_t b_ranks = 0;
  for (const LoraAdapter& a : adapters_) b_ranks += a.b.size(1);
  stacked_b_ = zeros({base_->out_features(), b_ranks}, adapters_[0].b.dtype(), adapters_[0].b.device());
  std::vector<Tensor> as;
  for (const LoraAdapter& a : adapters_) as.push_back(a.a);
  stacked_a_ = rows_in_place(as);
  if (stacked_a_.defined()) return;
  int64_t ranks = 0;
  for (const LoraAdapter& a : adapters_) ranks += a.a.size(0);
  const Tensor& first = adapters_[0].a;
  stacked_a_ = empty({ranks, first.size(1)}, first.dtype(), first.device());
  int64_t row = 0;
  for (LoraAdapter& a : adapters_) {
    Tensor rows = stacked_a_.narrow(row, a.a.size(0));
    ops::cast(a.a, rows);
    a.a = rows;
    row += rows.size(0);
  }
}

uint64_t LoraWeight::mask_seed(size_t adapter) const {
  return seed_ * 0x9E3779B97F4A7C15ull + training_forwards_ * 0xD1B54A32D192ED03ull + adapter;
}

Tensor LoraWeight::branch_input(const Tensor& x, size_t adapter) const {
  if (!dropping()) return x;
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  ops::dropout(x, dropout_, mask_seed(adapter), out);
  return out;
}

Tensor LoraWeight::ranks_of(const Tensor& x, std::string_view variant) const {
  const int64_t T = x.size(0);
  if (stacks_a()) {
    Tensor h = empty({T, stacked_a_.size(0)}, x.dtype(), x.device());
    ops::linear(x, stacked_a_, Tensor(), h, variant);
    return h;
  }
  std::vector<Tensor> parts;
  for (size_t i = 0; i < adapters_.size(); ++i) {
    parts.push_back(empty({T, adapters_[i].a.size(0)}, x.dtype(), x.device()));
    ops::linear(branch_input(x, i), adapters_[i].a, Tensor(), parts.back(), variant);
  }
  if (parts.size() == 1) return parts[0];
  int64_t ranks = 0;
  std::vector<const Tensor*> ins;
  for (const Tensor& p : parts) {
    ranks += p.size(1);
    ins.push_back(&p);
  }
  Tensor out = empty({T, ranks}, x.dtype(), x.device());
  ops::concat_columns(ins, out);
  return out;
}

const Tensor& LoraWeight::stacked_b() const {
  std::vector<op::ScaledColumns> blocks;
  int64_t column = 0;
  for (const LoraAdapter& a : adapters_) {
    blocks.push_back({stacked_b_.narrow(a.row, a.rows), column, a.b, 0, a.b.size(1), a.scaling});
    column += a.b.size(1);
  }
  ops::add_scaled_columns_(blocks, false);
  return stacked_b_;
}

const Tensor* LoraWeight::base_added_last(const Tensor& x) const {
  return x.size(0) > op::NormLinear::kMaxRows ? base_->dense() : nullptr;
}

void LoraWeight::forward(const Tensor& x, const Tensor& bias, Tensor& y, const StepContext& ctx,
                         const std::string& layer) const {
  if (dropping()) ++training_forwards_;
  const std::string_view variant = ctx.kernels.of("Linear");
  const Tensor h = ranks_of(x, variant);
  const Tensor& b = stacked_b();
  ctx.keep(layer, "lora_ranks", h);
  ctx.keep(layer, "lora_stacked_b", b);
  if (const Tensor* w = base_added_last(x)) {
    ops::linear(h, b, bias, y, variant);
    ops::linear_add(x, *w, y);
    return;
  }
  base_->forward(x, bias, y, ctx, layer);
  ops::linear_add(h, b, y);
}

void LoraWeight::backward(const Tensor& x, const Tensor& dy, Tensor& dx, Tensor& dbias,
                          const BackwardContext& ctx, const std::string& layer) const {
  // Where the adapters' input gradient is written first, the base's dy W is added onto it last (as the
  // forward adds the base's product); the base weight's own gradients (a frozen one has none) come apart.
  const Tensor* w = stacks_a() && dx.defined() ? base_added_last(x) : nullptr;
  Tensor no_dx;
  base_->backward(x, dy, w ? no_dx : dx, dbias, ctx, layer);
  // Each adapter's accumulators, undefined where frozen.
  std::vector<Tensor> a_grads, b_grads;
  for (const LoraAdapter& a : adapters_) {
    a_grads.push_back(ctx.grads.of(lora_key(a.module, 'A')));
    b_grads.push_back(ctx.grads.of(lora_key(a.module, 'B')));
  }
  const auto any_defined = [](const std::vector<Tensor>& ts) {
    return std::any_of(ts.begin(), ts.end(), [](const Tensor& t) { return t.defined(); });
  };
  const bool a_wanted = any_defined(a_grads), b_wanted = any_defined(b_grads);
  if (!a_wanted && !b_wanted && !dx.defined()) return;
  // y += h stacked_b^T, h the adapters' A outputs as the forward kept them: dh = dy stacked_b (each adapter's
  // block of dy times its scaling * B), and adapter i's dB is its scaling times its block of dy^T h.
  const Tensor& h = ctx.kept(layer, "lora_ranks");
  const Tensor& b = ctx.kept(layer, "lora_stacked_b");
  Tensor dh = empty(h.shape(), x.dtype(), x.device()), no_bias;
  Tensor d_b = b_wanted ? zeros(b.shape(), DType::float32, x.device()) : Tensor();
  ops::linear_backward(h, b, dy, dh, d_b, no_bias);
  std::vector<op::ScaledColumns> blocks;
  int64_t column = 0;
  for (size_t i = 0; i < adapters_.size(); ++i) {
    const LoraAdapter& a = adapters_[i];
    if (b_grads[i].defined())
      blocks.push_back({b_grads[i], 0, d_b.narrow(a.row, a.rows), column, a.b.size(1), a.scaling});
    column += a.b.size(1);
  }
  if (!blocks.empty()) ops::add_scaled_columns_(blocks, true);
  if (!a_wanted && !dx.defined()) return;
  if (stacks_a()) {
    // h = x stacked_a^T: dx gets dh stacked_a, added into the base layer's dx in the product (or written, the
    // base's added onto it), and adapter i's dA is its rows of dh^T x: straight into the accumulators where
    // they are the rows of one matrix (a lone adapter's, or the optimizer's arena as install orders it), else
    // through a temporary.
    const Tensor accumulators = rows_in_place(a_grads);
    Tensor d_a = accumulators.defined() ? accumulators
                 : a_wanted             ? zeros(stacked_a_.shape(), DType::float32, x.device())
                                        : Tensor();
    if (w) {
      ops::linear_backward(x, stacked_a_, dh, dx, d_a, no_bias);
      ops::linear_add(dy, *w, dx, true);
    } else {
      if (d_a.defined()) ops::linear_backward(x, stacked_a_, dh, no_dx, d_a, no_bias);
      if (dx.defined()) ops::linear_add(dh, stacked_a_, dx, true);
    }
    if (accumulators.defined()) return;
    int64_t row = 0;
    for (size_t i = 0; i < adapters_.size(); ++i) {
      if (a_grads[i].defined()) ops::add_(a_grads[i], d_a.narrow(row, adapters_[i].a.size(0)));
      row += adapters_[i].a.size(0);
    }
    return;
  }
  // With dropout each adapter's input is x through its own mask: a product of x and a mask's backward each.
  std::vector<Tensor> dh_parts;
  if (adapters_.size() == 1) {
    dh_parts.push_back(dh);
  } else {
    std::vector<Tensor*> outs;
    for (const LoraAdapter& a : adapters_)
      dh_parts.push_back(empty({x.size(0), a.a.size(0)}, x.dtype(), x.device()));
    for (Tensor& p : dh_parts) outs.push_back(&p);
    ops::split_columns(dh, outs);
  }
  for (size_t i = 0; i < adapters_.size(); ++i) {
    if (!a_grads[i].defined() && !dx.defined()) continue;
    Tensor dinput = dx.defined() ? empty(x.shape(), x.dtype(), x.device()) : Tensor();
    ops::linear_backward(branch_input(x, i), adapters_[i].a, dh_parts[i], dinput, a_grads[i], no_bias);
    if (!dx.defined()) continue;
    ops::dropout(dinput, dropout_, mask_seed(i), dinput);  // the mask is its own backward
    ops::add_(dx, dinput);
  }
}

size_t LoraWeight::nbytes() const {
  size_t bytes = base_->nbytes();
  for (const LoraAdapter& a : adapters_) bytes += a.a.nbytes() + a.b.nbytes();
  return bytes;
}

std::vector<std::pair<std::string, Tensor>> attach_lora(CausalLM& model, const LoraConfig& config,
                                                        uint64_t seed) {
  std::vector<PlannedLinear> planned = plan(model, config);
  std::mt19937_64 rng(seed);
  for (PlannedLinear& p : planned) {
    const int64_t in = p.linear->weight().in_features();
    // kaiming_uniform_(a=sqrt(5)) bounds A by gain * sqrt(3 / in) with gain sqrt(2 / (1 + 5)): 1 / sqrt(in).
    // The uniform is drawn from the top 24 bits, so that the values do not depend on the standard library.
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    for (LoraAdapter& a : p.adapters) {
      const int64_t r = config.rank_of(a.module);
      Tensor host = Tensor::cpu({r, in}, DType::float32);
      for (int64_t i = 0; i < host.numel(); ++i) {
        const double u = static_cast<double>(rng() >> 40) * 0x1p-24;
        host.data<float>()[i] = static_cast<float>((2 * u - 1) * bound);
      }
      a.a = placed_as(host, model.dtype(), model.device());
      a.b = zeros({a.rows, r}, model.dtype(), model.device());
    }
  }
  install(model, std::move(planned), config, seed);
  return lora_tensors(model);
}

LoraConfig load_adapter(CausalLM& model, const std::string& dir) {
  check(fs::is_directory(dir), "adapter folder ", dir, " does not exist");
  const std::string weights = (fs::path(dir) / kWeightsFile).string();
  check(fs::exists(weights), dir, " has no ", kWeightsFile,
        fs::exists(fs::path(dir) / "adapter_model.bin")
            ? " (tfm reads safetensors only, not adapter_model.bin)"
            : "");
  const LoraConfig config = LoraConfig::from_file((fs::path(dir) / kConfigFile).string());
  const SafetensorsFile file = SafetensorsFile::open(weights);
  std::map<std::string, std::string> unused;  // saved key -> the key in the file
  for (const TensorInfo& t : file.tensors()) unused.emplace(without_adapter_name(t.name), t.name);

  std::vector<PlannedLinear> planned = plan(model, config);
  for (PlannedLinear& p : planned) {
    const int64_t in = p.linear->weight().in_features();
    for (LoraAdapter& a : p.adapters) {
      const int64_t r = config.rank_of(a.module);
      auto take = [&](char which, const Shape& shape) {
        const std::string key = lora_key(a.module, which);
        const auto it = unused.find(key);
        check(it != unused.end(), weights, " has no ", key, " (adapter_config.json targets ", a.module, ")");
        const TensorInfo& info = *file.find(it->second);
        check(info.shape == shape, weights, ": ", it->second, " has shape ", shape_str(info.shape),
              ", the model's ", a.module, " needs ", shape_str(shape), " (an adapter for another model?)");
        check(is_floating(info.dtype), weights, ": ", it->second, " is ", dtype_name(info.dtype),
              ", not a float");
        Tensor t = placed_as(file.get(it->second), model.dtype(), model.device());
        unused.erase(it);
        return t;
      };
      a.a = take('A', {r, in});
      a.b = take('B', {a.rows, r});
    }
  }
  if (!unused.empty())
    throw_error(
        weights, " has ", unused.begin()->second,
        ", which no module adapter_config.json targets in this model has (an adapter for another model?)");
  install(model, std::move(planned), config, 0);
  return config;
}

std::vector<std::pair<std::string, Tensor>> lora_tensors(CausalLM& model) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [linear, weight] : lora_weights(model))
    in_buffer_order(weight->adapters(), [&](const std::string& module, char which, const Tensor& t) {
      out.emplace_back(lora_key(module, which), t);
    });
  return out;
}

void save_adapter(CausalLM& model, const LoraConfig& config, const std::string& dir) {
  const std::vector<std::pair<std::string, Tensor>> tensors = on_host(lora_tensors(model));
  check(!tensors.empty(), "save_adapter: the model has no LoRA adapters");
  fs::create_directories(dir);
  save_safetensors((fs::path(dir) / kWeightsFile).string(), tensors, {{"format", "pt"}});
  LoraConfig saved = config;
  saved.inference_mode = true;  // as PEFT's save_pretrained writes it
  write_text((fs::path(dir) / kConfigFile).string(),
             json::dump(saved.to_json(),
                        {.indent = 2, .ensure_ascii = true, .sort_keys = true, .item_separator = ","}));
}

void merge_adapter(CausalLM& model) {
  for (const auto& [linear, weight] : lora_weights(model)) {
    const auto* dense = dynamic_cast<const DenseWeight*>(&weight->base());
    check(dense != nullptr, linear->name(), ": only adapters on dense weights can be merged");
    const Tensor& w = dense->tensor();
    Tensor merged = host_floats(w);
    const int64_t in = w.size(1);
    visit_float(w.dtype(), [&]<typename T>() {
      for (const LoraAdapter& a : weight->adapters()) {
        const Tensor A = host_floats(a.a), B = host_floats(a.b);
        const int64_t r = A.size(0);
        for (int64_t i = 0; i < a.rows; ++i) {
          float* row = merged.data<float>() + (a.row + i) * in;
          for (int64_t k = 0; k < in; ++k) {
            float delta = 0;
            for (int64_t j = 0; j < r; ++j) delta += B.data<float>()[i * r + j] * A.data<float>()[j * in + k];
            row[k] = round_to<T>(row[k] + round_to<T>(delta * a.scaling));
          }
        }
      }
    });
    linear->replace_weight(std::make_unique<DenseWeight>(placed_as(merged, w.dtype(), w.device())));
  }
}

}  // namespace tfm

#include "tfm/train/adamw.h"

#include <algorithm>
#include <cmath>
#include <regex>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/ops/ops.h"

namespace tfm {
namespace {

// Whether `next`'s tensors lie right after `last`'s in the model's storage and, with no padding between them,
// in every arena: one launch over the span then updates both and writes nothing else. Tensors of one dtype
// have their masters alike (the params themselves in float32, else views of the masters arena).
bool continues(const AdamW::Entry& last, const AdamW::Entry& next) {
  return last.param.numel() % 4 == 0 && next.param.lies_right_after(last.param) && next.decay == last.decay;
}

// `length` elements of `first`'s storage from where `first` starts, as one row.
Tensor span_from(const Tensor& first, int64_t length) {
  return Tensor(first.storage(), {length}, first.dtype(), first.offset());
}

}  // namespace

bool decays(const std::string& name) {
  static const std::regex forbidden(R"(bias|layernorm|rmsnorm|(?:^|\.)norm(?:$|\.)|_norm(?:$|\.))");
  return !std::regex_search(name, forbidden);
}

AdamW::AdamW(AdamWOptions options, const std::vector<TrainedTensor>& params) : options_(options) {
  check(!params.empty(), "the optimizer has no parameters");
  const Device device = params.front().value.device();
  for (const TrainedTensor& p : params)
    check(p.value.device() == device, "the optimizer's tensors are on one device: ", p.name, " is on ",
          p.value.device().str(), ", ", params.front().name, " on ", device.str());
  std::vector<int64_t> numels;
  for (const TrainedTensor& p : params) numels.push_back(p.value.numel());
  const std::vector<int64_t> offsets = arena_offsets(numels);
  const int64_t total = offsets.back();
  grads_ = zeros({total}, DType::float32, device);
  const Tensor exp_avg = zeros({total}, DType::float32, device),
               exp_avg_sq = zeros({total}, DType::float32, device);
  const bool float_masters = std::any_of(
      params.begin(), params.end(), [](const TrainedTensor& p) { return p.value.dtype() != DType::float32; });
  const Tensor masters = float_masters ? zeros({total}, DType::float32, device) : Tensor();
  for (size_t i = 0; i < params.size(); ++i) {
    const TrainedTensor& p = params[i];
    const auto view = [&](const Tensor& arena) {
      return arena.narrow(offsets[i], p.value.numel()).reshape(p.value.shape());
    };
    Entry e{p.name, p.value, p.value, view(grads_), view(exp_avg), view(exp_avg_sq), decays(p.name)};
    if (p.value.dtype() != DType::float32) {
      e.master = view(masters);
      ops::cast(p.value, e.master);
    }
    gradients_.add(p.name, e.grad);
    for (const std::string& alias : p.aliases) gradients_.add(alias, e.grad);
    entries_.push_back(std::move(e));
  }
  for (size_t begin = 0, end = 1; begin < entries_.size(); begin = end++) {
    while (end < entries_.size() && continues(entries_[end - 1], entries_[end])) ++end;
    const Entry& first = entries_[begin];
    const int64_t length =
        entries_[end - 1].param.offset() + entries_[end - 1].param.numel() - first.param.offset();
    runs_.push_back({first.name, span_from(first.param, length), span_from(first.master, length),
                     span_from(first.grad, length), span_from(first.exp_avg, length),
                     span_from(first.exp_avg_sq, length), first.decay});
  }
}

double AdamW::clip_grad_norm(double max_norm, double loss_scale) {
  Tensor total = zeros({1}, DType::float32, grads_.device());
  ops::sum_squares(grads_, total);
  const double norm = std::sqrt(static_cast<double>(to_device(total, Device{}).data<float>()[0])) / loss_scale;
  grad_scale_ = (max_norm > 0 ? std::min(1.0, max_norm / (norm + 1e-6)) : 1.0) / loss_scale;
  return norm;
}

void AdamW::step(double lr) {
  ++steps_;
  for (Entry& e : runs_) {
    Tensor model_copy = e.master.storage() == e.param.storage() ? Tensor() : e.param;
    const ops::AdamWStep s{.lr = lr,
                           .beta1 = options_.beta1,
                           .beta2 = options_.beta2,
                           .eps = options_.eps,
                           .weight_decay = e.decay ? options_.weight_decay : 0.0,
                           .grad_scale = grad_scale_,
                           .step = steps_};
    ops::adamw(e.master, e.grad, e.exp_avg, e.exp_avg_sq, model_copy, s);
  }
  grad_scale_ = 1.0;
  zero(grads_);
}

void AdamW::skip_step() {
  grad_scale_ = 1.0;
  zero(grads_);
}

const Tensor& AdamW::master(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return e.master;
  throw_error("the optimizer does not train ", name);
}

std::vector<std::pair<std::string, Tensor>> AdamW::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Entry& e : entries_) {
    if (e.master.storage() != e.param.storage()) out.emplace_back(e.name + ".master", e.master);
    out.emplace_back(e.name + ".exp_avg", e.exp_avg);
    out.emplace_back(e.name + ".exp_avg_sq", e.exp_avg_sq);
  }
  return out;
}

void AdamW::restore(const std::vector<std::pair<std::string, Tensor>>& state, int64_t steps) {
  auto find = [&](const std::string& name) -> const Tensor& {
    for (const auto& [n, t] : state)
      if (n == name) return t;
    throw_error("the optimizer state has no ", name);
  };
  for (Entry& e : entries_) {
    auto restore_into = [&](Tensor& dst, const std::string& what) {
      const Tensor& src = find(e.name + "." + what);
      check(src.shape() == dst.shape() && src.dtype() == DType::float32, "the optimizer state's ", e.name, ".",
            what, " is ", src.str(), ", the model's needs float32", shape_str(dst.shape()));
      copy(dst, to_device(src, dst.device()));
    };
    if (e.master.storage() != e.param.storage()) {
      restore_into(e.master, "master");
      ops::cast(e.master, e.param);
    }
    restore_into(e.exp_avg, "exp_avg");
    restore_into(e.exp_avg_sq, "exp_avg_sq");
  }
  steps_ = steps;
}

}  // namespace tfm

#include "tfm/train/adamw.h"

#include <cmath>
#include <regex>

#include "tfm/backend/backend.h"
#include "tfm/core/error.h"
#include "tfm/ops/ops.h"

namespace tfm {
namespace {

Tensor zeros_like_float(const Tensor& t) {
  Tensor z = empty(t.shape(), DType::float32, t.device());
  zero(z);
  return z;
}

}  // namespace

bool decays(const std::string& name) {
  static const std::regex forbidden(R"(bias|layernorm|rmsnorm|(?:^|\.)norm(?:$|\.)|_norm(?:$|\.))");
  return !std::regex_search(name, forbidden);
}

void AdamW::add(const std::string& name, const Tensor& param, const std::vector<std::string>& aliases) {
  Entry e{name, param, param, zeros_like_float(param), zeros_like_float(param), zeros_like_float(param),
          decays(name)};
  if (param.dtype() != DType::float32) {
    e.master = empty(param.shape(), DType::float32, param.device());
    ops::cast(param, e.master);
  }
  gradients_.add(name, e.grad);
  for (const std::string& alias : aliases) gradients_.add(alias, e.grad);
  entries_.push_back(std::move(e));
}

double AdamW::clip_grad_norm(double max_norm, double loss_scale) {
  check(!entries_.empty(), "the optimizer has no parameters");
  Tensor total = zeros_like_float(empty({1}, DType::float32, entries_.front().grad.device()));
  for (const Entry& e : entries_) ops::sum_squares(e.grad, total);
  const double norm = std::sqrt(static_cast<double>(to_device(total, Device{}).data<float>()[0])) / loss_scale;
  grad_scale_ = (max_norm > 0 ? std::min(1.0, max_norm / (norm + 1e-6)) : 1.0) / loss_scale;
  return norm;
}

void AdamW::step(double lr) {
  ++steps_;
  for (Entry& e : entries_) {
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
  gradients_.zero();
}

void AdamW::skip_step() {
  grad_scale_ = 1.0;
  gradients_.zero();
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

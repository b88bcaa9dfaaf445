#include "tfm/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "tfm/core/error.h"

namespace tfm {
namespace {

constexpr double kPi = std::numbers::pi;

// Python's float %: the result takes the divisor's sign.
double python_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// The lambdas' common warmup: linear from 0.
double linear_warmup(int64_t step, int64_t warmup) {
  return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup));
}

// The Python function get_scheduler calls for each type, named in its TypeErrors, and the keyword arguments
// it takes beyond those get_scheduler passes itself.
struct Constructor {
  const char* name;
  std::vector<std::string_view> kwargs;
};

Constructor constructor_of(SchedulerType type) {
  using S = SchedulerType;
  switch (type) {
    case S::linear:
      return {"get_linear_schedule_with_warmup", {}};
    case S::cosine:
      return {"get_cosine_schedule_with_warmup", {"num_cycles"}};
    case S::cosine_with_restarts:
      return {"get_cosine_with_hard_restarts_schedule_with_warmup", {"num_cycles"}};
    case S::polynomial:
      return {"get_polynomial_decay_schedule_with_warmup", {"lr_end", "power"}};
    case S::constant:
      return {"get_constant_schedule", {}};
    case S::constant_with_warmup:
      return {"get_constant_schedule_with_warmup", {}};
    case S::inverse_sqrt:
      return {"get_inverse_sqrt_schedule", {"timescale"}};
    case S::cosine_with_min_lr:
      return {"get_cosine_with_min_lr_schedule_with_warmup", {"num_cycles", "min_lr", "min_lr_rate"}};
    case S::cosine_warmup_with_min_lr:
      return {"get_cosine_with_min_lr_schedule_with_warmup_lr_rate",
              {"num_cycles", "min_lr", "min_lr_rate", "warmup_lr_rate"}};
    case S::warmup_stable_decay:
      return {"get_wsd_schedule",
              {"num_decay_steps", "num_stable_steps", "warmup_type", "decay_type", "min_lr_ratio", "num_cycles"}};
  }
  return {"?", {}};
}

// A numeric kwarg; nullopt when absent or None.
std::optional<double> number_kwarg(const json::Object& kwargs, std::string_view key) {
  for (const auto& [k, v] : kwargs) {
    if (k != key || v.is_null()) continue;
    check(v.is_number(), "lr_scheduler_kwargs: `", key, "` must be a number, found ",
          json::Value::type_name(v.type()));
    return v.as_double();
  }
  return std::nullopt;
}

std::optional<std::string> string_kwarg(const json::Object& kwargs, std::string_view key) {
  for (const auto& [k, v] : kwargs) {
    if (k != key) continue;
    check(v.is_string(), "lr_scheduler_kwargs: `", key, "` must be a string, found ",
          json::Value::type_name(v.type()));
    return v.as_string();
  }
  return std::nullopt;
}

// A cosine-with-min-lr schedule's floor as a ratio of the base rate, from min_lr or min_lr_rate.
double min_lr_rate_of(const json::Object& kwargs, double base_lr) {
  const std::optional<double> min_lr = number_kwarg(kwargs, "min_lr");
  const std::optional<double> min_lr_rate = number_kwarg(kwargs, "min_lr_rate");
  check(!(min_lr && min_lr_rate), "Only one of min_lr or min_lr_rate should be set");
  if (min_lr) return *min_lr / base_lr;
  check(min_lr_rate.has_value(), "One of min_lr or min_lr_rate should be set through the `lr_scheduler_kwargs`");
  return *min_lr_rate;
}

}  // namespace

LRSchedule::LRSchedule(SchedulerType type, double base_lr, int64_t num_warmup_steps, int64_t num_training_steps,
                       const json::Object& kwargs)
    : type_(type), base_lr_(base_lr), num_warmup_steps_(num_warmup_steps), num_training_steps_(num_training_steps) {
  using S = SchedulerType;
  if (type == S::constant || type == S::constant_with_warmup) return;

  const Constructor constructor = constructor_of(type);
  for (const auto& [key, value] : kwargs) {
    check(std::find(constructor.kwargs.begin(), constructor.kwargs.end(), key) != constructor.kwargs.end(),
          constructor.name, "() got an unexpected keyword argument '", key, "'");
  }
  if (type == S::cosine_with_restarts) num_cycles_ = 1;
  num_cycles_ = number_kwarg(kwargs, "num_cycles").value_or(num_cycles_);

  switch (type) {
    case S::polynomial:
      lr_end_ = number_kwarg(kwargs, "lr_end").value_or(lr_end_);
      power_ = number_kwarg(kwargs, "power").value_or(power_);
      check(base_lr > lr_end_, "lr_end (", json::python_float_repr(lr_end_), ") must be smaller than initial lr (",
            json::python_float_repr(base_lr), ")");
      break;
    case S::inverse_sqrt:
      // Unset: the warmup steps, or 10000 without warmup.
      timescale_ = number_kwarg(kwargs, "timescale")
                       .value_or(num_warmup_steps != 0 ? static_cast<double>(num_warmup_steps) : 10000);
      check(timescale_ != 0, "inverse_sqrt schedule: `timescale` must not be 0 (Transformers divides by it)");
      break;
    case S::cosine_with_min_lr:
      min_lr_rate_ = min_lr_rate_of(kwargs, base_lr);
      break;
    case S::cosine_warmup_with_min_lr:
      min_lr_rate_ = min_lr_rate_of(kwargs, base_lr);
      warmup_lr_rate_ = number_kwarg(kwargs, "warmup_lr_rate");
      break;
    case S::warmup_stable_decay: {
      const std::optional<double> decay = number_kwarg(kwargs, "num_decay_steps");
      check(decay.has_value(), "get_wsd_schedule() missing 1 required positional argument: 'num_decay_steps'");
      num_decay_steps_ = *decay;
      const auto shape = [&](const char* key, const char* what, Shape fallback) {
        const std::optional<std::string> name = string_kwarg(kwargs, key);
        if (!name) return fallback;
        if (*name == "linear") return Shape::linear;
        if (*name == "cosine") return Shape::cosine;
        if (*name == "1-sqrt") return Shape::one_minus_sqrt;
        throw_error("Unknown ", what, " type: ", *name, ", expected 'linear', 'cosine' or '1-sqrt'");
      };
      warmup_shape_ = shape("warmup_type", "warmup", Shape::linear);
      decay_shape_ = shape("decay_type", "decay", Shape::cosine);
      min_lr_ratio_ = number_kwarg(kwargs, "min_lr_ratio").value_or(0);
      num_stable_steps_ = number_kwarg(kwargs, "num_stable_steps")
                              .value_or(static_cast<double>(num_training_steps - num_warmup_steps) - num_decay_steps_);
      break;
    }
    default:
      break;
  }
}

LRSchedule LRSchedule::from_args(const TrainingArguments& args, int64_t num_training_steps) {
  return LRSchedule(args.lr_scheduler_type, args.learning_rate, args.get_warmup_steps(num_training_steps),
                    num_training_steps, args.lr_scheduler_kwargs.value_or(json::Object{}));
}

double LRSchedule::lr_lambda(int64_t step) const {
  using S = SchedulerType;
  const int64_t warmup = num_warmup_steps_;
  const int64_t total = num_training_steps_;
  // The decay lambdas' progress through the steps after warmup.
  const auto progress = [&] {
    return static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, total - warmup));
  };
  // Each expression keeps Python's order of operations, so the rates match to the last bit.
  switch (type_) {
    case S::constant:
      return 1;
    case S::constant_with_warmup:
      return step < warmup ? linear_warmup(step, warmup) : 1.0;
    case S::linear:
      if (step < warmup) return linear_warmup(step, warmup);
      return std::max(0.0, static_cast<double>(total - step) / static_cast<double>(std::max<int64_t>(1, total - warmup)));
    case S::cosine:
    case S::cosine_with_min_lr: {
      if (step < warmup) return linear_warmup(step, warmup);
      double factor = 0.5 * (1.0 + std::cos(kPi * num_cycles_ * 2.0 * progress()));
      factor = factor * (1 - min_lr_rate_) + min_lr_rate_;
      return std::max(0.0, factor);
    }
    case S::cosine_with_restarts: {
      if (step < warmup) return linear_warmup(step, warmup);
      const double p = progress();
      if (p >= 1.0) return 0.0;
      return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * python_mod(num_cycles_ * p, 1.0))));
    }
    case S::polynomial: {
      if (step < warmup) return linear_warmup(step, warmup);
      if (step > total) return lr_end_ / base_lr_;
      const int64_t decay_steps = total - warmup;
      check(decay_steps != 0, "polynomial schedule: division by zero at step ", step,
            " (num_warmup_steps equals num_training_steps)");
      const double pct_remaining = 1 - static_cast<double>(step - warmup) / static_cast<double>(decay_steps);
      const double decay = (base_lr_ - lr_end_) * std::pow(pct_remaining, power_) + lr_end_;
      return decay / base_lr_;
    }
    case S::inverse_sqrt: {
      if (step < warmup) return linear_warmup(step, warmup);
      const double shift = timescale_ - static_cast<double>(warmup);
      return 1.0 / std::sqrt((static_cast<double>(step) + shift) / timescale_);
    }
    case S::cosine_warmup_with_min_lr: {
      const double s = static_cast<double>(step);
      const double w = static_cast<double>(warmup);
      if (s < w) {
        if (!warmup_lr_rate_) return (s + 1.0) / std::max(1.0, w);
        return *warmup_lr_rate_ + (1.0 - *warmup_lr_rate_) * s / std::max(1.0, w - 1);
      }
      const double p = (s - w + 1.0) / std::max(1.0, static_cast<double>(total) - w);
      double factor = 0.5 * (1.0 + std::cos(kPi * num_cycles_ * 2.0 * p));
      factor = factor * (1 - min_lr_rate_) + min_lr_rate_;
      return std::max(0.0, factor);
    }
    case S::warmup_stable_decay: {
      const double s = static_cast<double>(step);
      const double w = static_cast<double>(warmup);
      double factor = 0;
      if (s < w) {
        const double p = s / static_cast<double>(std::max<int64_t>(1, warmup));
        factor = warmup_shape_ == Shape::linear   ? p
                 : warmup_shape_ == Shape::cosine ? 0.5 * (1.0 - std::cos(kPi * p))
                                                  : 1.0 - std::sqrt(1.0 - p);
      } else if (s < w + num_stable_steps_) {
        return 1.0;
      } else if (s < w + num_stable_steps_ + num_decay_steps_) {
        const double p = (s - w - num_stable_steps_) / std::max(1.0, num_decay_steps_);
        factor = decay_shape_ == Shape::linear   ? 1.0 - p
                 : decay_shape_ == Shape::cosine ? 0.5 * (1.0 + std::cos(kPi * num_cycles_ * 2.0 * p))
                                                 : 1.0 - std::sqrt(p);
      } else {
        return min_lr_ratio_;
      }
      factor = factor * (1.0 - min_lr_ratio_) + min_lr_ratio_;
      return std::max(0.0, factor);
    }
  }
  return 1;
}

}  // namespace tfm

// The parity fixtures of tests/fixtures/models/: small random models with the logits and greedy continuations
// Transformers gave for them (recorded by tests/fixtures/make_fixtures.py), and the helpers that compare a
// model's outputs with those. Shared by the CPU parity test and the device backends' tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tfm/io/json.h"
#include "tfm/model/causal_lm.h"

namespace tfm::parity {

inline const std::string kFixtures = std::string(TFM_SOURCE_DIR) + "/tests/fixtures/models/";

struct Prompt {
  std::vector<int64_t> ids;
  std::vector<int64_t> argmax;
  std::vector<float> last_logits;
  std::vector<int64_t> generated;
};

inline std::vector<int64_t> ints(const json::Value& v) {
  std::vector<int64_t> out;
  for (const auto& x : v.as_array()) out.push_back(x.as_int());
  return out;
}

inline std::vector<Prompt> reference(const std::string& model) {
  const json::Value ref = json::parse_file(kFixtures + model + "/reference.json");
  std::vector<Prompt> prompts;
  for (const json::Value& p : ref.at("prompts").as_array()) {
    Prompt prompt{ints(p.at("ids")), ints(p.at("argmax")), {}, ints(p.at("generated"))};
    for (const auto& x : p.at("last_logits").as_array())
      prompt.last_logits.push_back(static_cast<float>(x.as_double()));
    prompts.push_back(std::move(prompt));
  }
  return prompts;
}

inline int64_t argmax(const float* row, int64_t n) {
  return std::max_element(row, row + n) - row;
}

// max |a - b| / max |b|: the error relative to the logits' scale.
inline double relative_error(const float* a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// Named float32 gradients on the host (a device's, copied back) against the CPU's, each within `tolerance` of
// relative_error; `what` names the case in the failure.
inline void expect_gradients_near(const std::vector<std::pair<std::string, Tensor>>& got,
                                  const std::vector<std::pair<std::string, Tensor>>& want, double tolerance,
                                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const Tensor& w = want[i].second;
    const std::vector<float> want_values(w.data<float>(), w.data<float>() + w.numel());
    EXPECT_LT(relative_error(got[i].second.data<float>(), want_values), tolerance)
        << what << " " << want[i].first;
  }
}

// Greedy decoding one token at a time through the cache, as generate() does.
inline std::vector<int64_t> greedy(CausalLM& model, const std::vector<int64_t>& prompt, size_t max_new) {
  KVCache cache = model.make_cache(blocks_for(static_cast<int64_t>(prompt.size() + max_new), 4), 4);
  SequenceCache seq;
  std::vector<int64_t> next = prompt, out;
  while (out.size() < max_new) {
    BatchBuilder builder(cache);
    builder.add(seq, next, Logits::last);
    const Tensor logits = model.forward(builder.finish(), cache);
    next = {argmax(logits.data<float>(), logits.size(1))};
    out.push_back(next[0]);
  }
  return out;
}

// The model on `device`, prompt by prompt in both attention forms: the logits of every position, and a greedy
// continuation decoded token by token, against Transformers'.
inline void expect_logits_and_greedy_tokens(const std::string& model_name, const std::string& device) {
  for (const std::string attn : {"sdpa", "eager"}) {
    for (const Prompt& p : reference(model_name)) {
      // A fresh model per prompt, as the reference was made (dynamic RoPE keeps state between calls).
      CausalLM model = CausalLM::from_pretrained(kFixtures + model_name, {.dtype = "float32", .device = device, .attn_implementation = attn});
      KVCache cache = model.make_cache(blocks_for(static_cast<int64_t>(p.ids.size()), 4), 4);
      SequenceCache seq;
      BatchBuilder builder(cache);
      builder.add(seq, p.ids, Logits::all);
      const Tensor logits = model.forward(builder.finish(), cache);
      const int64_t V = logits.size(1);
      for (size_t t = 0; t < p.ids.size(); ++t) {
        EXPECT_EQ(argmax(logits.data<float>() + static_cast<int64_t>(t) * V, V), p.argmax[t])
            << attn << " position " << t;
      }
      EXPECT_LT(
          relative_error(logits.data<float>() + static_cast<int64_t>(p.ids.size() - 1) * V, p.last_logits),
          1e-4)
          << attn;
      // Decode steps with use_kernels take the fused kernels (the norms folded into the matmuls after them).
      for (bool use_kernels : {false, true}) {
        CausalLM fresh = CausalLM::from_pretrained(
            kFixtures + model_name,
            {.dtype = "float32", .device = device, .attn_implementation = attn, .use_kernels = use_kernels});
        EXPECT_EQ(greedy(fresh, p.ids, p.generated.size()), p.generated)
            << attn << (use_kernels ? " with use_kernels" : "") << " prompt of " << p.ids.size();
      }
    }
  }
}

// All prompts in one ragged batch on `device`, then one decode step for all of them, against Transformers'.
inline void expect_ragged_batch(const std::string& model_name, const std::string& device) {
  const std::vector<Prompt> prompts = reference(model_name);
  CausalLM model = CausalLM::from_pretrained(kFixtures + model_name, {.dtype = "float32", .device = device});
  KVCache cache = model.make_cache(64, 4);
  std::vector<SequenceCache> seqs(prompts.size());
  BatchBuilder builder(cache);
  for (size_t i = 0; i < prompts.size(); ++i) builder.add(seqs[i], prompts[i].ids, Logits::last);
  const Tensor logits = model.forward(builder.finish(), cache);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_LT(relative_error(logits.data<float>() + static_cast<int64_t>(i) * logits.size(1),
                             prompts[i].last_logits),
              1e-4);
  }
  // A decode step for all three at once, each after its own prompt, matches Transformers' first greedy token.
  BatchBuilder step(cache);
  for (size_t i = 0; i < prompts.size(); ++i) step.add(seqs[i], {prompts[i].generated[0]}, Logits::last);
  const Tensor next = model.forward(step.finish(), cache);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(argmax(next.data<float>() + static_cast<int64_t>(i) * next.size(1), next.size(1)),
              prompts[i].generated[1]);
  }
}

// Transformers' logits in a 16-bit dtype for one prompt (tests/fixtures/make_dtype_references.py).
struct DTypePrompt {
  std::vector<int64_t> ids;
  std::vector<float> last_logits;
  float last_top2_margin;
};

// The references of `model_name` in `dtype` as Transformers computed them on `device_kind` ("cpu" or "cuda").
inline std::vector<DTypePrompt> dtype_reference(const std::string& model_name, const std::string& dtype,
                                                const std::string& device_kind) {
  const json::Value ref = json::parse_file(kFixtures + model_name + "/dtype_reference.json");
  std::vector<DTypePrompt> prompts;
  for (const json::Value& p : ref.at(dtype).at(device_kind).as_array()) {
    DTypePrompt prompt{ints(p.at("ids")), {}, static_cast<float>(p.at("last_top2_margin").as_double())};
    for (const auto& x : p.at("last_logits").as_array()) prompt.last_logits.push_back(static_cast<float>(x.as_double()));
    prompts.push_back(std::move(prompt));
  }
  return prompts;
}

// ||a - b|| / ||b||
inline double relative_l2(const float* a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

// The model in `dtype` ("bfloat16", "float16") on `device`, prompt by prompt in both attention forms, against
// Transformers in the same dtype on the CPU and on CUDA (which differ from each other by up to 1% in bf16, where
// torch's CPU attention kernel takes a path of its own for longer prompts): last-position logits within 2e-2
// relative (L2) of both, and the same argmax unless Transformers' own top two are closer than that tolerance
// allows a correct implementation to tell apart.
inline void expect_dtype_parity(const std::string& model_name, const std::string& device, const std::string& dtype) {
  for (const std::string attn : {"sdpa", "eager"}) {
    for (const std::string reference_device : {"cpu", "cuda"}) {
      for (const DTypePrompt& p : dtype_reference(model_name, dtype, reference_device)) {
        CausalLM model = CausalLM::from_pretrained(kFixtures + model_name,
                                                   {.dtype = dtype, .device = device, .attn_implementation = attn});
        KVCache cache = model.make_cache(blocks_for(static_cast<int64_t>(p.ids.size()), 4), 4);
        SequenceCache seq;
        BatchBuilder builder(cache);
        builder.add(seq, p.ids, Logits::last);
        const Tensor logits = model.forward(builder.finish(), cache);
        const std::string what = attn + " against Transformers on " + reference_device + ", prompt of " +
                                 std::to_string(p.ids.size());
        EXPECT_LT(relative_l2(logits.data<float>(), p.last_logits), 2e-2) << what;
        double norm = 0;
        for (float x : p.last_logits) norm += static_cast<double>(x) * x;
        if (p.last_top2_margin > 2e-2 * std::sqrt(norm / static_cast<double>(p.last_logits.size()))) {
          EXPECT_EQ(argmax(logits.data<float>(), logits.size(1)), argmax(p.last_logits.data(), logits.size(1)))
              << what << ", Transformers' margin " << p.last_top2_margin;
        }
      }
    }
  }
}

}  // namespace tfm::parity

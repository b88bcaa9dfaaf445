// The tensors a checkpoint of each architecture holds, by their Hub names, and streaming them to a device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/model/config.h"

namespace tfm {

struct WeightSpec {
  std::string name;  // "model.layers.0.self_attn.q_proj.weight"
  Shape shape;
};

// Every tensor config.json implies, in the order Transformers' state_dict lists them (lm_head absent when
// tied).
std::vector<WeightSpec> expected_weights(const ModelConfig& config);

// Copies every file of a model folder but its weights (safetensors, their index, .bin) into `to`: the config,
// generation and tokenizer files a folder written with new weights keeps.
void copy_model_files_but_weights(const std::string& from, const std::string& to);

// Moves a checkpoint's tensors to a device in the model's dtype, one tensor at a time, so that host memory
// holds no copy of the model: a tensor stored in the model's dtype goes from the file mapping to the device as
// it is (a cpu model keeps viewing the mapping, no copy at all), one stored in another dtype is converted on
// its way in chunks. Opening checks the checkpoint against the config: missing, unexpected and misshapen
// tensors are errors naming file and tensor. With `progress`, a load that takes over a second shows
// Transformers' "Loading weights" bar on stderr.
class WeightLoader {
 public:
  WeightLoader(const std::string& dir, const ModelConfig& config, DType dtype, Device device, bool progress);
  ~WeightLoader();
  WeightLoader(const WeightLoader&) = delete;
  WeightLoader& operator=(const WeightLoader&) = delete;

  bool has(const std::string& name) const;
  // The tensor `name` on the device.
  Tensor take(const std::string& name);
  // The tensors `names` (same columns) stacked by rows into one device tensor: q/k/v and gate/up become one
  // matmul each.
  Tensor take_rows(const std::vector<std::string>& names);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tfm

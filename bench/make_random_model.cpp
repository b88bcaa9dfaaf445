// Writes a random-weight model folder in the Hub's format from a config.json, so that tfm and the
// Transformers peer can load the same full-size model on a machine that cannot download weights.
//
//   make_random_model CONFIG_JSON OUT_DIR [--seed S] [--std X]
//
// Weights are bf16 (the Hub's usual dtype), drawn uniformly with the given standard deviation (norm weights
// are near 1); the folder gets config.json, generation_config.json and 5 GB safetensors shards with their
// index, as save_pretrained writes them.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "tfm/core/error.h"
#include "tfm/core/floats.h"
#include "tfm/core/parallel.h"
#include "tfm/io/checkpoint.h"
#include "tfm/io/json.h"
#include "tfm/model/config.h"
#include "tfm/model/weights.h"

namespace {

// splitmix64: fast, and each element's value depends only on (seed, tensor, index), so threads need no
// sharing.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

tfm::Tensor random_bf16(const tfm::Shape& shape, uint64_t seed, float center, float std) {
  tfm::Tensor t = tfm::Tensor::cpu(shape, tfm::DType::bfloat16);
  uint16_t* p = t.data<uint16_t>();
  const int64_t n = t.numel();
  const float half_width =
      std * 1.7320508f;  // a uniform variable on [-a, a] has standard deviation a / sqrt(3)
  tfm::parallel_for(n, {}, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const double u = static_cast<double>(mix(seed ^ static_cast<uint64_t>(i)) >> 11) * 0x1.0p-53;
      p[i] = tfm::float_to_bf16(center + half_width * static_cast<float>(2 * u - 1));
    }
  });
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    tfm::check(argc >= 3, "usage: make_random_model CONFIG_JSON OUT_DIR [--seed S] [--std X]");
    const std::string config_path = argv[1], out = argv[2];
    uint64_t seed = 0;
    float std = 0.02f;
    for (int i = 3; i + 1 < argc; i += 2) {
      if (std::string(argv[i]) == "--seed")
        seed = std::stoull(argv[i + 1]);
      else if (std::string(argv[i]) == "--std")
        std = std::stof(argv[i + 1]);
      else
        tfm::throw_error("unknown option ", argv[i]);
    }
    const tfm::json::Value config_json = tfm::json::parse_file(config_path);
    const tfm::ModelConfig config = tfm::ModelConfig::from_json(config_json, config_path);

    std::vector<std::pair<std::string, tfm::Tensor>> tensors;
    uint64_t index = 0;
    for (const tfm::WeightSpec& w : tfm::expected_weights(config)) {
      const bool norm = w.name.ends_with("norm.weight");
      tensors.emplace_back(w.name,
                           random_bf16(w.shape, mix(seed + ++index), norm ? 1.f : 0.f, norm ? 0.1f : std));
    }
    std::filesystem::create_directories(out);
    tfm::save_sharded(out, tensors, size_t{5} << 30, {{"format", "pt"}});
    std::filesystem::copy_file(config_path, out + "/config.json",
                               std::filesystem::copy_options::overwrite_existing);
    tfm::json::Value generation;
    if (config.bos_token_id) generation.set("bos_token_id", *config.bos_token_id);
    if (!config.eos_token_id.empty()) generation.set("eos_token_id", config.eos_token_id[0]);
    generation.set("do_sample", false);
    std::ofstream(out + "/generation_config.json") << tfm::json::dump(generation) << "\n";
    std::cout << "wrote " << tensors.size() << " tensors to " << out << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

// One model, ready to serve: loaded with its tokenizer and chat templates, an engine stepping on a thread of
// its own, and the completion service over it.
#pragma once

#include <string>

#include "tfm/engine/async_engine.h"
#include "tfm/engine/engine.h"
#include "tfm/generate/auto.h"
#include "tfm/server/completion_service.h"

namespace tfm::server {

class ServedModel {
 public:
  // `dir` is a local model folder (resolve_pretrained makes one of a Hub id); clients call the model `name`.
  ServedModel(const std::string& dir, std::string name, const PretrainedOptions& options,
              const EngineConfig& engine_config);

  CompletionService& service() { return service_; }
  const AutoModelForCausalLM& model() const { return model_; }

 private:
  AutoModelForCausalLM model_;
  tokenizer::Tokenizer tokenizer_;
  Engine engine_;
  AsyncEngine async_engine_;
  CompletionService service_;  // declared last: destroyed before the engine it uses
};

}  // namespace tfm::server

#include "tfm/server/served_model.h"

namespace tfm::server {

ServedModel::ServedModel(const std::string& dir, std::string name, const PretrainedOptions& options,
                         const EngineConfig& engine_config)
    : model_(AutoModelForCausalLM::from_pretrained(dir, options)),
      tokenizer_(tokenizer::AutoTokenizer::from_pretrained(dir, name)),
      engine_(model_.model(), model_.generation_config(), engine_config,
              [this](const std::vector<int64_t>& ids) {
                return tokenizer_.decode(ids, /*skip_special_tokens=*/true);
              }),
      async_engine_(engine_),
      service_(async_engine_, tokenizer_, load_chat_templates(dir, tokenizer_.config()),
               model_.generation_config(), std::move(name), model_.model().config().max_position_embeddings) {
}

}  // namespace tfm::server

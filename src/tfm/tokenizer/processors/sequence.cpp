#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/processors/post_processor.h"

namespace tfm::tokenizer {
namespace {

class PostProcessorSequence : public PostProcessor {
 public:
  explicit PostProcessorSequence(std::vector<std::unique_ptr<PostProcessor>> steps)
      : steps_(std::move(steps)) {}
  void process(std::vector<int32_t>& ids) const override {
    for (const auto& s : steps_) s->process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor_sequence(const json::Value& v) {
  std::vector<std::unique_ptr<PostProcessor>> steps;
  for (const json::Value& p : required(v, "processors").as_array())
    if (auto s = make_post_processor(p)) steps.push_back(std::move(s));
  return std::make_unique<PostProcessorSequence>(std::move(steps));
}

}  // namespace tfm::tokenizer

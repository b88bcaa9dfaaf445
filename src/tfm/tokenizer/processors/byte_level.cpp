// ByteLevel post-processor: only trims offsets, which tfm does not report, so the ids pass unchanged.
#include "tfm/tokenizer/processors/post_processor.h"

namespace tfm::tokenizer {
namespace {

class ByteLevelProcessor : public PostProcessor {
 public:
  void process(std::vector<int32_t>&) const override {}
};

}  // namespace

std::unique_ptr<PostProcessor> make_byte_level_processor(const json::Value&) {
  return std::make_unique<ByteLevelProcessor>();
}

}  // namespace tfm::tokenizer

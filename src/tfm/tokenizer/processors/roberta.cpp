// RobertaProcessing and BertProcessing: cls, the sequence, sep; each given as ["token", id].
#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/processors/post_processor.h"

namespace tfm::tokenizer {
namespace {

class ClsSep : public PostProcessor {
 public:
  ClsSep(int32_t cls, int32_t sep) : cls_(cls), sep_(sep) {}
  void process(std::vector<int32_t>& ids) const override {
    ids.insert(ids.begin(), cls_);
    ids.push_back(sep_);
  }

 private:
  int32_t cls_, sep_;
};

int32_t token_id(const json::Value& v, std::string_view key) {
  const json::Value& pair = required(v, key);
  check(pair.is_array() && pair.size() == 2 && pair[1].is_int(), "'", key, "' must be [\"token\", id]");
  return static_cast<int32_t>(pair[1].as_int());
}

}  // namespace

std::unique_ptr<PostProcessor> make_roberta_processing(const json::Value& v) {
  return std::make_unique<ClsSep>(token_id(v, "cls"), token_id(v, "sep"));
}

}  // namespace tfm::tokenizer

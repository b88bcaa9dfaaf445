// TemplateProcessing: the single-sequence template, e.g. "<s>:0 $A:0 </s>:0", with the ids of each special
// token from its special_tokens table.
#include <optional>

#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/processors/post_processor.h"

namespace tfm::tokenizer {
namespace {

class TemplateProcessing : public PostProcessor {
 public:
  // Each item is either the sequence (nullopt) or the ids of a special token.
  explicit TemplateProcessing(std::vector<std::optional<std::vector<int32_t>>> items)
      : items_(std::move(items)) {}

  void process(std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + items_.size());
    for (const auto& item : items_) {
      if (item)
        out.insert(out.end(), item->begin(), item->end());
      else
        out.insert(out.end(), ids.begin(), ids.end());
    }
    ids = std::move(out);
  }

 private:
  std::vector<std::optional<std::vector<int32_t>>> items_;
};

// "$A", "$B:1", "<s>:0", "$0": the written form of a template item.
json::Value parse_item_string(const std::string& s) {
  const std::string name = s.substr(0, s.rfind(':') == std::string::npos ? s.size() : s.rfind(':'));
  json::Value item;
  if (!name.empty() && name[0] == '$') {
    json::Value seq;
    seq.set("id", name == "$B" || name == "$1" ? "B" : "A");
    item.set("Sequence", std::move(seq));
  } else {
    json::Value special;
    special.set("id", name);
    item.set("SpecialToken", std::move(special));
  }
  return item;
}

}  // namespace

std::unique_ptr<PostProcessor> make_template_processing(const json::Value& v) {
  const json::Value& specials = required(v, "special_tokens");
  std::vector<std::optional<std::vector<int32_t>>> items;
  for (const json::Value& raw : required(v, "single").as_array()) {
    const json::Value item = raw.is_string() ? parse_item_string(raw.as_string()) : raw;
    if (const json::Value* seq = item.find("Sequence")) {
      check(required(*seq, "id").as_string() == "A", "the single template may only name sequence A");
      items.emplace_back(std::nullopt);
      continue;
    }
    const json::Value* special = item.find("SpecialToken");
    if (!special) throw_error("template item must be a SpecialToken or a Sequence, found ", json::dump(item));
    const std::string& name = required(*special, "id").as_string();
    const json::Value* entry = specials.find(name);
    check(entry != nullptr, "template names special token '", name, "', missing from special_tokens");
    std::vector<int32_t> ids;
    for (const json::Value& id : required(*entry, "ids").as_array())
      ids.push_back(static_cast<int32_t>(id.as_int()));
    items.emplace_back(std::move(ids));
  }
  return std::make_unique<TemplateProcessing>(std::move(items));
}

}  // namespace tfm::tokenizer

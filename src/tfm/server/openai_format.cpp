#include "tfm/server/openai_format.h"

#include <cmath>
#include <random>

namespace tfm::server {
namespace {

bool is_chat(const ResponseHeader& h) {
  return h.endpoint == Endpoint::chat_completions;
}

json::Value optional_string(const std::optional<std::string>& s) {
  return s ? json::Value(*s) : json::Value();
}

// JSON has no infinity: a token the sampler ruled out gets OpenAI's floor instead of -inf.
double finite_logprob(double logprob) {
  return std::isnan(logprob) || logprob < -9999.0 ? -9999.0 : logprob;
}

json::Value utf8_bytes(const std::string& text) {
  json::Array bytes;
  for (char c : text) bytes.push_back(static_cast<int64_t>(static_cast<unsigned char>(c)));
  return bytes;
}

json::Value chat_logprob(const std::string& token, double logprob) {
  return json::Object{{"token", token}, {"logprob", finite_logprob(logprob)}, {"bytes", utf8_bytes(token)}};
}

json::Value logprobs_json(const ResponseHeader& h, const std::vector<TokenLogprob>& logprobs) {
  if (!h.logprobs) return nullptr;
  if (is_chat(h)) {
    json::Array content;
    for (const TokenLogprob& lp : logprobs) {
      json::Value entry = chat_logprob(lp.token, lp.logprob);
      json::Array top;
      for (const auto& [token, logprob] : lp.top) top.push_back(chat_logprob(token, logprob));
      entry.set("top_logprobs", std::move(top));
      content.push_back(std::move(entry));
    }
    return json::Object{{"content", std::move(content)}};
  }
  json::Array tokens, token_logprobs, top_logprobs, text_offset;
  for (const TokenLogprob& lp : logprobs) {
    tokens.push_back(lp.token);
    token_logprobs.push_back(finite_logprob(lp.logprob));
    json::Value top = json::Object{};
    for (const auto& [token, logprob] : lp.top) top.set(token, finite_logprob(logprob));
    top_logprobs.push_back(std::move(top));
    text_offset.push_back(lp.text_offset);
  }
  return json::Object{{"tokens", std::move(tokens)},
                      {"token_logprobs", std::move(token_logprobs)},
                      {"top_logprobs", std::move(top_logprobs)},
                      {"text_offset", std::move(text_offset)}};
}

json::Value response_object(const ResponseHeader& h, bool chunk, json::Array choices) {
  json::Value out = json::Object{
      {"id", h.id},
      {"object", is_chat(h) ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
      {"created", h.created},
      {"model", h.model},
      {"choices", std::move(choices)},
  };
  if (chunk && h.include_usage) out.set("usage", nullptr);
  return out;
}

}  // namespace

std::string new_response_id(Endpoint endpoint) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = endpoint == Endpoint::chat_completions ? "chatcmpl-" : "cmpl-";
  for (int i = 0; i < 24; ++i) id += kHex[rng() % 16];
  return id;
}

void ChoiceResult::add(const ChoiceDelta& delta) {
  text += delta.text;
  logprobs.insert(logprobs.end(), delta.logprobs.begin(), delta.logprobs.end());
  if (delta.finish_reason) finish_reason = *delta.finish_reason;
}

json::Value error_body(const ApiError& e) {
  return json::Object{{"error", json::Object{{"message", e.what()},
                                             {"type", e.type},
                                             {"param", optional_string(e.param)},
                                             {"code", optional_string(e.code)}}}};
}

json::Value usage_json(const Usage& u) {
  return json::Object{{"prompt_tokens", u.prompt_tokens},
                      {"completion_tokens", u.completion_tokens},
                      {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json::Value completion_response(const ResponseHeader& h, const std::vector<ChoiceResult>& choices,
                                const Usage& usage) {
  json::Array out;
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    json::Value choice = json::Object{{"index", static_cast<int64_t>(i)}};
    if (is_chat(h)) {
      choice.set("message", json::Object{{"role", "assistant"}, {"content", c.text}});
    } else {
      choice.set("text", c.text);
    }
    choice.set("logprobs", logprobs_json(h, c.logprobs));
    choice.set("finish_reason", c.finish_reason);
    out.push_back(std::move(choice));
  }
  json::Value response = response_object(h, false, std::move(out));
  response.set("usage", usage_json(usage));
  return response;
}

json::Value model_json(const std::string& model, int64_t created) {
  return json::Object{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "tfm"}};
}

json::Value models_response(const std::string& model, int64_t created) {
  return json::Object{{"object", "list"}, {"data", json::Array{model_json(model, created)}}};
}

std::vector<json::Value> opening_chunks(const ResponseHeader& h, size_t num_choices) {
  std::vector<json::Value> chunks;
  if (!is_chat(h)) return chunks;
  for (size_t i = 0; i < num_choices; ++i) {
    chunks.push_back(response_object(h, true,
                                     json::Array{json::Object{
                                         {"index", static_cast<int64_t>(i)},
                                         {"delta", json::Object{{"role", "assistant"}, {"content", ""}}},
                                         {"logprobs", nullptr},
                                         {"finish_reason", nullptr},
                                     }}));
  }
  return chunks;
}

std::vector<json::Value> delta_chunks(const ResponseHeader& h, const ChoiceDelta& d) {
  const auto index = static_cast<int64_t>(d.index);
  std::vector<json::Value> chunks;
  if (d.text.empty() && d.logprobs.empty() && !d.finish_reason) return chunks;
  if (!is_chat(h)) {
    chunks.push_back(response_object(h, true,
                                     json::Array{json::Object{
                                         {"index", index},
                                         {"text", d.text},
                                         {"logprobs", logprobs_json(h, d.logprobs)},
                                         {"finish_reason", optional_string(d.finish_reason)},
                                     }}));
    return chunks;
  }
  // OpenAI's chat stream ends a choice with a chunk of its own: an empty delta and the finish reason.
  if (!d.text.empty() || !d.logprobs.empty()) {
    chunks.push_back(response_object(h, true,
                                     json::Array{json::Object{
                                         {"index", index},
                                         {"delta", json::Object{{"content", d.text}}},
                                         {"logprobs", logprobs_json(h, d.logprobs)},
                                         {"finish_reason", nullptr},
                                     }}));
  }
  if (d.finish_reason) {
    chunks.push_back(response_object(h, true,
                                     json::Array{json::Object{
                                         {"index", index},
                                         {"delta", json::Object{}},
                                         {"logprobs", nullptr},
                                         {"finish_reason", *d.finish_reason},
                                     }}));
  }
  return chunks;
}

json::Value usage_chunk(const ResponseHeader& h, const Usage& usage) {
  json::Value chunk = response_object(h, true, json::Array{});
  chunk.set("usage", usage_json(usage));
  return chunk;
}

std::string sse_event(const json::Value& data) {
  return "data: " + json::dump_compact(data) + "\n\n";
}

}  // namespace tfm::server

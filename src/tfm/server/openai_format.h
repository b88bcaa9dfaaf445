// OpenAI's response objects as JSON: whole responses, the chunks of a server-sent event stream, errors and
// the model list. Plain functions of plain data; nothing here knows about HTTP.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/io/json.h"
#include "tfm/server/completion_service.h"
#include "tfm/server/openai_request.h"

namespace tfm::server {

// What every object of one response repeats.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::completions;
  std::string id;       // chatcmpl-... or cmpl-...
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool logprobs = false;       // the request asked for log probabilities
  bool include_usage = false;  // stream_options.include_usage: every chunk has "usage", null until the last
};

// A new response id: "chatcmpl-" or "cmpl-" and 24 random hex digits.
std::string new_response_id(Endpoint endpoint);

// The whole of one choice, collected for a response that is not streamed.
struct ChoiceResult {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::string finish_reason;
  void add(const ChoiceDelta& delta);
};

json::Value error_body(const ApiError& error);
json::Value usage_json(const Usage& usage);
json::Value completion_response(const ResponseHeader& header, const std::vector<ChoiceResult>& choices,
                                const Usage& usage);
json::Value models_response(const std::string& model, int64_t created);
json::Value model_json(const std::string& model, int64_t created);

// Streaming. A chat stream opens with each choice's role; then each delta is a chunk (and, for chat, its
// finish reason one more); a final chunk with no choices carries the usage when it was asked for.
std::vector<json::Value> opening_chunks(const ResponseHeader& header, size_t num_choices);
std::vector<json::Value> delta_chunks(const ResponseHeader& header, const ChoiceDelta& delta);
json::Value usage_chunk(const ResponseHeader& header, const Usage& usage);
// "data: {json}\n\n"
std::string sse_event(const json::Value& data);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace tfm::server

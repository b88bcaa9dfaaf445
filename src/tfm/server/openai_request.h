// The OpenAI API's request bodies for /v1/chat/completions and /v1/completions, read into plain structs and
// checked field by field. Whatever a client can get wrong is an ApiError carrying the HTTP status and the
// error object OpenAI answers with, naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tfm/io/json.h"

namespace tfm::server {

// An error the client is told about: {"error": {"message", "type", "param", "code"}} with an HTTP status.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error",
           std::optional<std::string> param = std::nullopt, std::optional<std::string> code = std::nullopt)
      : std::runtime_error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string type;
  std::optional<std::string> param;
  std::optional<std::string> code;
};

enum class Endpoint { chat_completions, completions };

// A completions prompt: text, or token ids.
using Prompt = std::variant<std::string, std::vector<int64_t>>;

struct CompletionRequest {
  Endpoint endpoint = Endpoint::completions;
  std::optional<std::string> model;  // absent: the one model served
  json::Value messages;              // chat: the messages, each text content one string
  std::vector<Prompt> prompts;       // completions: one choice set per prompt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int64_t n = 1;               // choices per prompt
  std::vector<std::string> stop;
  std::optional<int64_t> max_tokens;  // max_completion_tokens or max_tokens
  std::optional<double> temperature;  // 0: greedy
  std::optional<double> top_p;
  std::optional<int64_t> seed;
  double presence_penalty = 0;
  double frequency_penalty = 0;
  std::optional<int64_t>
      top_logprobs;  // set: log probabilities of the chosen and this many most likely tokens
  bool ignore_eos =
      false;  // vLLM's extension: generate max_tokens whatever the model says (benchmarks use it)
};

// Parses and checks a request body (JSON text) for the endpoint; throws ApiError.
CompletionRequest parse_completion_request(Endpoint endpoint, std::string_view body);

}  // namespace tfm::server

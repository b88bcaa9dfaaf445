// The completion service: OpenAI requests (as plain structs) become engine requests, and what the engine
// generates comes back as text per choice. It owns no thread: the engine's thread hands each step's output to
// the request's inbox, and the thread that started a completion (an HTTP handler) pulls from it, turning
// tokens into text there, so the engine's thread never waits on detokenizing or on a slow client.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tfm/engine/async_engine.h"
#include "tfm/server/detokenizer.h"
#include "tfm/server/metrics.h"
#include "tfm/server/openai_request.h"
#include "tfm/tokenizer/chat_template.h"
#include "tfm/tokenizer/tokenizer.h"

namespace tfm::server {

struct TokenLogprob {
  std::string token;  // the token's text (U+FFFD where it holds part of a character)
  double logprob = 0;
  std::vector<std::pair<std::string, double>> top;  // the most likely tokens, most likely first
  int64_t text_offset = 0;  // characters of the choice's earlier tokens' texts (the completions API's offset)
};

// What one choice got since the last Completion::next.
struct ChoiceDelta {
  size_t index = 0;  // OpenAI's choice index: prompt * n + j
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::optional<std::string> finish_reason;  // "stop" or "length", once the choice is done
};

struct Usage {
  int64_t prompt_tokens = 0;  // each prompt once, however many choices it has
  int64_t completion_tokens = 0;
};

class CompletionService;

// One API request being generated: n choices per prompt, each an engine request. Used by one thread; the
// destructor cancels what has not finished, which frees its KV blocks at once.
class Completion {
 public:
  ~Completion();
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;

  // Waits up to `timeout` for the engine; returns what the choices got, one delta per choice that changed.
  std::vector<ChoiceDelta> next(std::chrono::milliseconds timeout);
  // Every choice has finished, or the completion failed.
  bool done() const { return unfinished_ == 0; }
  // Why the completion failed: the engine's step failed, or the server is shutting down.
  const std::optional<ApiError>& error() const { return error_; }
  Usage usage() const;
  size_t num_choices() const { return choices_.size(); }
  // The client is gone: the engine requests end now.
  void cancel();

 private:
  friend class CompletionService;
  using Clock = std::chrono::steady_clock;

  struct Arrival {
    size_t choice = 0;
    RequestOutput output;
    Clock::time_point at;
  };
  // Filled on the engine's thread (and by abort), emptied by next().
  struct Inbox {
    std::mutex mutex;
    std::condition_variable arrived;
    std::vector<Arrival> arrivals;
    std::optional<ApiError> aborted;
  };
  struct Choice {
    IncrementalDetokenizer detokenizer;
    RequestId request = 0;
    int64_t generated = 0;
    bool finished = false;
    Clock::time_point last_token{};
    int64_t logprob_text_offset = 0;  // characters of the token texts so far
  };

  Completion(CompletionService& service, Clock::time_point arrival, int64_t prompt_tokens);
  // Queues the engine request of the next choice.
  void submit(const std::vector<int64_t>& prompt, const RequestOptions& options,
              const std::vector<std::string>& stop);
  // From another thread: ends the completion with `error`.
  void abort(const ApiError& error);
  void process(Arrival& arrival, std::vector<ChoiceDelta>& deltas);
  void finish(Choice& choice, const std::string& reason);

  CompletionService& service_;
  std::shared_ptr<Inbox> inbox_ = std::make_shared<Inbox>();
  std::vector<Choice> choices_;
  Clock::time_point arrival_;
  int64_t prompt_tokens_ = 0;
  size_t unfinished_ = 0;
  std::optional<ApiError> error_;
};

class CompletionService {
 public:
  // `model_name` is what clients call the model (the "model" field); the context length bounds prompt and
  // completion together.
  CompletionService(AsyncEngine& engine, const tokenizer::Tokenizer& tokenizer, ChatTemplates chat_templates,
                    GenerationConfig generation_config, std::string model_name, int64_t context_length);

  // Checks the request against the model (its name, the context length), tokenizes it (chat messages through
  // the chat template) and queues its engine requests. Throws ApiError.
  std::unique_ptr<Completion> start(const CompletionRequest& request);

  const std::string& model_name() const { return model_name_; }
  std::string metrics() const;
  // Completions started and not yet destroyed.
  size_t in_flight() const;
  // Waits until no completion is in flight; false when `timeout` passed first.
  bool wait_idle(std::chrono::milliseconds timeout) const;
  // Ends every completion in flight with `error` (the server is going down).
  void abort_all(const ApiError& error);

 private:
  friend class Completion;

  std::vector<std::vector<int64_t>> tokenize(const CompletionRequest& request) const;
  RequestOptions request_options(const CompletionRequest& request, int64_t prompt_length) const;
  std::string token_text(int64_t id) const;
  std::string decode(const std::vector<int64_t>& ids) const;
  void forget(Completion* completion);

  AsyncEngine& engine_;
  const tokenizer::Tokenizer& tokenizer_;
  ChatTemplates chat_templates_;
  GenerationConfig generation_config_;
  std::string model_name_;
  int64_t context_length_;

  mutable std::mutex metrics_mutex_;
  ServingMetrics metrics_;

  mutable std::mutex live_mutex_;
  mutable std::condition_variable idle_;
  std::set<Completion*> live_;
};

}  // namespace tfm::server

#include "tfm/server/completion_service.h"

#include <algorithm>

#include "tfm/core/error.h"

namespace tfm::server {
namespace {

int64_t code_points(std::string_view text) {
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

ChoiceDelta& delta_of(std::vector<ChoiceDelta>& deltas, size_t index) {
  for (ChoiceDelta& d : deltas) {
    if (d.index == index) return d;
  }
  ChoiceDelta& d = deltas.emplace_back();
  d.index = index;
  return d;
}

}  // namespace

// ---- Completion

Completion::Completion(CompletionService& service, Clock::time_point arrival, int64_t prompt_tokens)
    : service_(service), arrival_(arrival), prompt_tokens_(prompt_tokens) {}

Completion::~Completion() {
  cancel();
  service_.forget(this);
}

void Completion::submit(const std::vector<int64_t>& prompt, const RequestOptions& options,
                        const std::vector<std::string>& stop) {
  const size_t index = choices_.size();
  choices_.push_back(Choice{IncrementalDetokenizer(
      [&s = service_](const std::vector<int64_t>& ids) { return s.decode(ids); }, stop)});
  try {
    choices_.back().request =
        service_.engine_.submit(prompt, options, [inbox = inbox_, index](const RequestOutput& output) {
          {
            std::lock_guard lock(inbox->mutex);
            inbox->arrivals.push_back({index, output, Clock::now()});
          }
          inbox->arrived.notify_one();
        });
  } catch (...) {
    choices_.pop_back();
    throw;
  }
  ++unfinished_;
}

std::vector<ChoiceDelta> Completion::next(std::chrono::milliseconds timeout) {
  std::vector<Arrival> arrivals;
  std::optional<ApiError> aborted;
  {
    std::unique_lock lock(inbox_->mutex);
    inbox_->arrived.wait_for(lock, timeout, [&] { return !inbox_->arrivals.empty() || inbox_->aborted; });
    arrivals.swap(inbox_->arrivals);
    aborted = inbox_->aborted;
  }
  std::vector<ChoiceDelta> deltas;
  for (Arrival& a : arrivals) process(a, deltas);
  if (aborted && !done()) {
    error_ = aborted;
    for (Choice& c : choices_) {
      if (!c.finished) finish(c, "abort");
    }
  }
  return deltas;
}

void Completion::process(Arrival& arrival, std::vector<ChoiceDelta>& deltas) {
  Choice& c = choices_[arrival.choice];
  if (c.finished) return;  // cancelled, while the engine's step was running
  const RequestOutput& out = arrival.output;
  if (!out.error.empty()) {
    if (!error_) error_ = ApiError(500, "Generation failed: " + out.error, "server_error");
    finish(c, "error");
    return;
  }
  {
    std::lock_guard lock(service_.metrics_mutex_);
    const std::chrono::duration<double> latency = arrival.at - (c.generated == 0 ? arrival_ : c.last_token);
    (c.generated == 0 ? service_.metrics_.time_to_first_token : service_.metrics_.inter_token_latency)
        .observe(latency.count());
  }
  c.last_token = arrival.at;
  c.generated += static_cast<int64_t>(out.new_tokens.size());
  ChoiceDelta& d = delta_of(deltas, arrival.choice);
  for (size_t i = 0; i < out.logprobs.size(); ++i) {
    TokenLogprob lp;
    lp.token = service_.token_text(out.new_tokens[i]);
    lp.logprob = out.logprobs[i].logprob;
    lp.text_offset = c.logprob_text_offset;
    for (const auto& [id, logprob] : out.logprobs[i].top)
      lp.top.emplace_back(service_.token_text(id), logprob);
    c.logprob_text_offset += code_points(lp.token);
    d.logprobs.push_back(std::move(lp));
  }
  d.text += c.detokenizer.add(out.new_tokens);
  if (out.finished) {
    d.text += c.detokenizer.finish();
    const bool cut = out.stop == StopReason::max_length || out.stop == StopReason::max_time;
    d.finish_reason = cut ? "length" : "stop";
  } else if (c.detokenizer.stopped()) {
    // The text holds a stop string that the engine's check did not see (one that spans a skipped special
    // token): the request ends here.
    service_.engine_.cancel(c.request);
    d.finish_reason = "stop";
  }
  if (d.finish_reason) finish(c, *d.finish_reason);
}

void Completion::finish(Choice& choice, const std::string& reason) {
  choice.finished = true;
  --unfinished_;
  std::lock_guard lock(service_.metrics_mutex_);
  ++service_.metrics_.finished[reason];
}

void Completion::cancel() {
  // Outputs that already arrived count first: a choice that finished before its client left ended as it
  // ended.
  next(std::chrono::milliseconds(0));
  for (Choice& c : choices_) {
    if (c.finished) continue;
    service_.engine_.cancel(c.request);
    finish(c, "abort");
  }
}

void Completion::abort(const ApiError& error) {
  {
    std::lock_guard lock(inbox_->mutex);
    inbox_->aborted = error;
  }
  inbox_->arrived.notify_one();
  for (const Choice& c : choices_) service_.engine_.cancel(c.request);
}

Usage Completion::usage() const {
  Usage u{.prompt_tokens = prompt_tokens_};
  for (const Choice& c : choices_) u.completion_tokens += c.generated;
  return u;
}

// ---- CompletionService

CompletionService::CompletionService(AsyncEngine& engine, const tokenizer::Tokenizer& tokenizer,
                                     ChatTemplates chat_templates, GenerationConfig generation_config,
                                     std::string model_name, int64_t context_length)
    : engine_(engine),
      tokenizer_(tokenizer),
      chat_templates_(std::move(chat_templates)),
      generation_config_(std::move(generation_config)),
      model_name_(std::move(model_name)),
      context_length_(context_length) {}

std::unique_ptr<Completion> CompletionService::start(const CompletionRequest& request) {
  const auto arrival = Completion::Clock::now();
  if (request.model && *request.model != model_name_) {
    throw ApiError(404, "The model `" + *request.model + "` does not exist.", "invalid_request_error",
                   "model", "model_not_found");
  }
  const std::vector<std::vector<int64_t>> prompts = tokenize(request);
  std::vector<RequestOptions> options;
  int64_t prompt_tokens = 0;
  for (const std::vector<int64_t>& prompt : prompts) {
    options.push_back(request_options(request, static_cast<int64_t>(prompt.size())));
    prompt_tokens += static_cast<int64_t>(prompt.size());
  }
  std::unique_ptr<Completion> completion(new Completion(*this, arrival, prompt_tokens));
  try {
    for (size_t p = 0; p < prompts.size(); ++p) {
      for (int64_t j = 0; j < request.n; ++j) {
        // Choices of one request share its seed; the stream index gives each its own draws.
        options[p].stream = completion->choices_.size();
        completion->submit(prompts[p], options[p], request.stop);
      }
    }
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
  {
    std::lock_guard lock(metrics_mutex_);
    metrics_.prompt_tokens += prompt_tokens;
  }
  std::lock_guard lock(live_mutex_);
  live_.insert(completion.get());
  return completion;
}

std::vector<std::vector<int64_t>> CompletionService::tokenize(const CompletionRequest& request) const {
  std::vector<std::vector<int64_t>> prompts;
  if (request.endpoint == Endpoint::chat_completions) {
    ChatTemplateInputs inputs;
    inputs.messages = request.messages;
    inputs.add_generation_prompt = true;
    std::string text;
    try {
      text = apply_chat_template(chat_templates_, tokenizer_.config(), inputs);
    } catch (const Error& e) {
      throw ApiError(400, std::string("The chat template could not be applied to the messages: ") + e.what(),
                     "invalid_request_error", "messages");
    }
    // The template writes the special tokens itself.
    prompts.push_back(tokenizer_.encode(text, /*add_special_tokens=*/false));
  } else {
    for (const Prompt& p : request.prompts) {
      prompts.push_back(std::holds_alternative<std::string>(p) ? tokenizer_.encode(std::get<std::string>(p))
                                                               : std::get<std::vector<int64_t>>(p));
    }
  }
  for (const std::vector<int64_t>& p : prompts) {
    if (p.empty()) {
      throw ApiError(400, "The prompt is empty: it gives no tokens.", "invalid_request_error",
                     request.endpoint == Endpoint::chat_completions ? "messages" : "prompt");
    }
  }
  return prompts;
}

RequestOptions CompletionService::request_options(const CompletionRequest& request,
                                                  int64_t prompt_length) const {
  const bool chat = request.endpoint == Endpoint::chat_completions;
  const std::string what = chat ? "messages" : "prompt";
  const std::string context =
      "This model's maximum context length is " + std::to_string(context_length_) + " tokens. ";
  if (prompt_length >= context_length_) {
    throw ApiError(400,
                   context + "However, your " + what + " resulted in " + std::to_string(prompt_length) +
                       " tokens. Please reduce the length of the " + what + ".",
                   "invalid_request_error", what, "context_length_exceeded");
  }
  const int64_t room = context_length_ - prompt_length;
  if (request.max_tokens && *request.max_tokens > room) {
    throw ApiError(400,
                   context + "However, you requested " + std::to_string(prompt_length + *request.max_tokens) +
                       " tokens (" + std::to_string(prompt_length) + " in the " + what + ", " +
                       std::to_string(*request.max_tokens) +
                       " in the completion). Please reduce the length of the " + what + " or completion.",
                   "invalid_request_error", what, "context_length_exceeded");
  }
  // OpenAI's defaults: a chat answer may fill the context, a completion is 16 tokens.
  const int64_t max_new_tokens = request.max_tokens.value_or(chat ? room : std::min<int64_t>(16, room));

  RequestOptions options;
  json::Value generation = json::Object{{"max_new_tokens", max_new_tokens}};
  if (request.ignore_eos) generation.set("min_new_tokens", max_new_tokens);
  // Unset sampling fields fall back to the model's generation_config.json, then to OpenAI's defaults
  // (temperature 1, no top-k): a request samples unless its temperature is 0.
  const double temperature = request.temperature.value_or(generation_config_.temperature.value_or(1.0));
  if (temperature == 0) {
    generation.set("do_sample", false);
  } else {
    generation.set("do_sample", true);
    if (request.temperature) generation.set("temperature", *request.temperature);
    if (request.top_p) generation.set("top_p", *request.top_p);
    if (!generation_config_.top_k) generation.set("top_k", 0);
  }
  if (!request.stop.empty()) {
    json::Array stop;
    for (const std::string& s : request.stop) stop.push_back(s);
    generation.set("stop_strings", std::move(stop));
  }
  if (request.seed) generation.set("seed", *request.seed);
  options.generation = std::move(generation.as_object());
  options.sampling.presence_penalty = request.presence_penalty;
  options.sampling.frequency_penalty = request.frequency_penalty;
  options.sampling.top_logprobs = request.top_logprobs.value_or(-1);
  return options;
}

std::string CompletionService::token_text(int64_t id) const {
  return tokenizer_.decode({id}, /*skip_special_tokens=*/false);
}

std::string CompletionService::decode(const std::vector<int64_t>& ids) const {
  return tokenizer_.decode(ids, /*skip_special_tokens=*/true);
}

std::string CompletionService::metrics() const {
  const EngineStats engine = engine_.stats();
  std::lock_guard lock(metrics_mutex_);
  return render_metrics(engine, metrics_);
}

size_t CompletionService::in_flight() const {
  std::lock_guard lock(live_mutex_);
  return live_.size();
}

bool CompletionService::wait_idle(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(live_mutex_);
  return idle_.wait_for(lock, timeout, [&] { return live_.empty(); });
}

void CompletionService::abort_all(const ApiError& error) {
  std::lock_guard lock(live_mutex_);
  for (Completion* c : live_) c->abort(error);
}

void CompletionService::forget(Completion* completion) {
  std::lock_guard lock(live_mutex_);
  live_.erase(completion);
  if (live_.empty()) idle_.notify_all();
}

}  // namespace tfm::server

#include "tfm/server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tfm/core/error.h"
#include "tfm/io/sha256.h"
#include "tfm/server/openai_format.h"

namespace tfm::server {
namespace {

using Handled = httplib::Server::HandlerResponse;

void send_json(httplib::Response& res, int status, const json::Value& body) {
  res.status = status;
  res.set_content(json::dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status, error_body(e));
}

ApiError shutting_down() {
  return ApiError(503, "The server is shutting down.", "server_error");
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Compares two digests of the same length in time that does not depend on where they differ.
bool same_digest(std::string_view a, std::string_view b) {
  unsigned char difference = a.size() != b.size();
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

// How long a streaming response waits for the engine before it checks that its client is still there.
constexpr std::chrono::milliseconds kStreamPoll{100};
// A response that is not streamed only waits for its completion; shutdown wakes it.
constexpr std::chrono::milliseconds kResponsePoll{1000};

// One streamed response: writes the completion's deltas as server-sent events. It lives as long as the HTTP
// response; when the client goes away the write fails, the response is dropped, and with it the Completion,
// whose destructor cancels the engine requests, so their KV blocks are freed at once.
class EventStream {
 public:
  EventStream(std::unique_ptr<Completion> completion, ResponseHeader header)
      : completion_(std::move(completion)), header_(std::move(header)) {}

  // httplib's content provider: false ends the response.
  bool pump(httplib::DataSink& sink) {
    std::string events;
    if (!opened_) {
      for (const json::Value& chunk : opening_chunks(header_, completion_->num_choices()))
        events += sse_event(chunk);
      opened_ = true;
    }
    for (const ChoiceDelta& delta : completion_->next(kStreamPoll)) {
      for (const json::Value& chunk : delta_chunks(header_, delta)) events += sse_event(chunk);
    }
    const bool done = completion_->done();
    if (done) {
      if (completion_->error()) {
        events += sse_event(error_body(*completion_->error()));
      } else if (header_.include_usage) {
        events += sse_event(usage_chunk(header_, completion_->usage()));
      }
      events += kSseDone;
    }
    if (events.empty()) return sink.is_writable();  // nothing to say: is the client still there?
    if (!sink.write(events.data(), events.size())) return false;
    if (done) sink.done();
    return true;
  }

 private:
  std::unique_ptr<Completion> completion_;
  ResponseHeader header_;
  bool opened_ = false;
};

}  // namespace

HttpServer::HttpServer(CompletionService& service, ServerConfig config)
    : service_(service),
      config_(std::move(config)),
      created_(unix_seconds()),
      http_(std::make_unique<httplib::Server>()) {
  if (config_.api_key) api_key_digest_ = io::sha256_hex(*config_.api_key);
  check(config_.max_connections > 0, "max_connections must be positive, got ", config_.max_connections);
  http_->new_task_queue = [n = static_cast<size_t>(config_.max_connections)] {
    return new httplib::ThreadPool(n);
  };
  // httplib's default options let another process bind the same port (SO_REUSEPORT); a taken port must be an
  // error instead. The socket is kept for shutdown() and for a longer backlog.
  http_->set_socket_options([this](socket_t socket) {
    const int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_socket_ = socket;
  });
  http_->set_payload_max_length(64 << 20);

  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!req.path.starts_with("/v1/")) return Handled::Unhandled;
    if (draining_) {
      send_error(res, shutting_down());
      return Handled::Handled;
    }
    return authorized(req, res) ? Handled::Unhandled : Handled::Handled;
  });
  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining_) {
      send_json(res, 503, json::Object{{"status", "shutting down"}});
    } else {
      send_json(res, 200, json::Object{{"status", "ok"}});
    }
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(service_.metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, models_response(service_.model_name(), created_));
  });
  http_->Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] == service_.model_name()) {
      send_json(res, 200, model_json(service_.model_name(), created_));
    } else {
      send_error(res, ApiError(404, "The model `" + req.matches[1].str() + "` does not exist.",
                               "invalid_request_error", "model", "model_not_found"));
    }
  });
  http_->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(Endpoint::chat_completions, req, res);
  });
  http_->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(Endpoint::completions, req, res);
  });
  // Whatever httplib answers by itself (an unknown path, an unreadable request) gets OpenAI's error shape
  // too.
  http_->set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return Handled::Unhandled;
        send_error(
            res, ApiError(res.status, res.status == 404 ? "Invalid URL (" + req.method + " " + req.path + ")"
                                                        : "The request could not be read."));
        return Handled::Handled;
      }));
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "The server failed: " + what, "server_error"));
  });

  port_ = config_.port == 0 ? http_->bind_to_any_port(config_.host)
                            : (http_->bind_to_port(config_.host, config_.port) ? config_.port : -1);
  check(port_ > 0, "cannot listen on ", config_.host, ":", config_.port,
        " (the port is taken, or the address is not one of this machine's)");
  // httplib listens with a backlog of 5: clients connecting in a burst would have their connections dropped
  // and retried a second later.
  ::listen(listen_socket_, SOMAXCONN);
}

HttpServer::~HttpServer() {
  config_.shutdown_grace = {};
  shutdown();
}

std::string HttpServer::address() const {
  return "http://" + config_.host + ":" + std::to_string(port_);
}

void HttpServer::start() {
  thread_ = std::thread([this] { http_->listen_after_bind(); });
}

void HttpServer::shutdown() {
  if (draining_.exchange(true)) return;
  if (!thread_.joinable()) {  // never started: httplib will not close the socket
    ::close(listen_socket_);
    return;
  }
  // The accept loop fails on the shut socket, closes it and ends; httplib's pool then finishes the
  // connections it has (their new requests get 503) before listen_after_bind returns.
  ::shutdown(listen_socket_, SHUT_RDWR);
  if (!service_.wait_idle(config_.shutdown_grace)) service_.abort_all(shutting_down());
  thread_.join();
}

bool HttpServer::authorized(const httplib::Request& req, httplib::Response& res) const {
  if (!config_.api_key) return true;
  constexpr std::string_view kBearer = "Bearer ";
  const std::string header = req.get_header_value("Authorization");
  if (!header.starts_with(kBearer)) {
    send_error(res,
               ApiError(401,
                        "You didn't provide an API key. You need to provide your API key in an Authorization "
                        "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."));
    return false;
  }
  if (!same_digest(io::sha256_hex(std::string_view(header).substr(kBearer.size())), api_key_digest_)) {
    send_error(res, ApiError(401, "Incorrect API key provided.", "invalid_request_error", std::nullopt,
                             "invalid_api_key"));
    return false;
  }
  return true;
}

void HttpServer::handle_completion(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  try {
    const CompletionRequest request = parse_completion_request(endpoint, req.body);
    std::unique_ptr<Completion> completion = service_.start(request);
    ResponseHeader header{.endpoint = endpoint,
                          .id = new_response_id(endpoint),
                          .created = unix_seconds(),
                          .model = service_.model_name(),
                          .logprobs = request.top_logprobs.has_value(),
                          .include_usage = request.include_usage};
    if (request.stream) {
      stream(std::move(completion), header, res);
    } else {
      respond(*completion, header, res);
    }
  } catch (const ApiError& e) {
    send_error(res, e);
  }
}

void HttpServer::respond(Completion& completion, const ResponseHeader& header, httplib::Response& res) {
  std::vector<ChoiceResult> choices(completion.num_choices());
  while (!completion.done()) {
    for (const ChoiceDelta& delta : completion.next(kResponsePoll)) choices[delta.index].add(delta);
  }
  if (completion.error()) {
    send_error(res, *completion.error());
  } else {
    send_json(res, 200, completion_response(header, choices, completion.usage()));
  }
}

void HttpServer::stream(std::unique_ptr<Completion> completion, const ResponseHeader& header,
                        httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  auto events = std::make_shared<EventStream>(std::move(completion), header);
  // Exactly "text/event-stream": httplib compresses other text types, which would hold events back.
  res.set_chunked_content_provider("text/event-stream",
                                   [events](size_t, httplib::DataSink& sink) { return events->pump(sink); });
}

}  // namespace tfm::server

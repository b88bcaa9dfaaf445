// The HTTP face of the completion service, OpenAI-compatible:
//   POST /v1/chat/completions, POST /v1/completions (JSON, or server-sent events with "stream": true)
//   GET  /v1/models, /v1/models/{id}
//   GET  /health   (no API key needed; 503 once shutting down, so a load balancer stops sending)
//   GET  /metrics  (Prometheus text; no API key needed)
// Each connection is served by a thread of a fixed pool; a streaming request's thread writes its events as
// the engine produces them, and a client that goes away cancels its request.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "tfm/server/completion_service.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace tfm::server {

struct ResponseHeader;

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                                  // 0: any free port
  std::optional<std::string> api_key;               // set: /v1/ requests need "Authorization: Bearer <key>"
  std::chrono::milliseconds shutdown_grace{30000};  // how long shutdown() lets requests in flight run
  int64_t max_connections = 512;  // connections served at once (one thread each); more wait for a thread
};

class HttpServer {
 public:
  // Binds the address (throws tfm::Error when it cannot); serving starts with start().
  HttpServer(CompletionService& service, ServerConfig config);
  ~HttpServer();  // shuts down without a grace period when shutdown() was not called
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  std::string address() const;  // http://host:port
  // Serves on a thread of its own.
  void start();
  // Stops accepting connections and new requests, lets requests in flight finish for up to the grace period,
  // ends the rest with an error, and returns once every connection is closed.
  void shutdown();

 private:
  void handle_completion(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  void respond(Completion& completion, const ResponseHeader& header, httplib::Response& res);
  void stream(std::unique_ptr<Completion> completion, const ResponseHeader& header, httplib::Response& res);
  bool authorized(const httplib::Request& req, httplib::Response& res) const;

  CompletionService& service_;
  ServerConfig config_;
  std::string api_key_digest_;  // SHA-256 of the key, compared in constant time
  int64_t created_ = 0;         // start time, the model's "created"
  std::unique_ptr<httplib::Server> http_;
  int listen_socket_ = -1;
  int port_ = 0;
  std::atomic<bool> draining_{false};
  std::thread thread_;
};

}  // namespace tfm::server

// What the server tests share: the demo model served on a free port of 127.0.0.1 from inside the test
// (float32 on the CPU, so that outputs are exact), and HTTP calls to it as any client makes them.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tfm/io/json.h"
#include "tfm/server/event_stream_reader.h"
#include "tfm/server/http_server.h"
#include "tfm/server/served_model.h"

namespace tfm::server::test {

inline const std::string kDemoModel = std::string(TFM_SOURCE_DIR) + "/models/demo";
inline constexpr const char* kModelName = "tfm-demo";

class LiveServer {
 public:
  explicit LiveServer(ServerConfig config = {}, EngineConfig engine = small_cache())
      : model_(kDemoModel, kModelName, {.dtype = "float32", .device_map = "cpu", .progress = false}, engine),
        http_(model_.service(), with_free_port(std::move(config))) {
    http_.start();
  }

  // A KV cache of 512 blocks (64 MB): room for 16 whole contexts of the demo model.
  static EngineConfig small_cache() {
    EngineConfig c;
    c.num_blocks = 512;
    return c;
  }

  int port() const { return http_.port(); }
  HttpServer& http() { return http_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port());
    c.set_read_timeout(60);
    return c;
  }

 private:
  static ServerConfig with_free_port(ServerConfig config) {
    config.host = "127.0.0.1";
    config.port = 0;
    return config;
  }

  ServedModel model_;
  HttpServer http_;
};

struct Reply {
  int status = 0;  // 0: no answer (the connection failed)
  json::Value body;
};

inline Reply to_reply(const httplib::Result& r) {
  if (!r) return {};
  return {r->status, r->body.empty() ? json::Value() : json::parse(r->body)};
}

inline Reply post(httplib::Client& c, const std::string& path, const std::string& body,
                  const httplib::Headers& headers = {}) {
  return to_reply(c.Post(path.c_str(), headers, body, "application/json"));
}

inline Reply post(httplib::Client& c, const std::string& path, const json::Value& body,
                  const httplib::Headers& headers = {}) {
  return post(c, path, json::dump(body), headers);
}

// A server-sent event stream as the client read it.
struct Stream {
  int status = 0;
  std::vector<json::Value> events;  // the data of each event but [DONE]
  bool done = false;                // ended with "data: [DONE]"
  std::string raw;
};

// POSTs `body` and reads the event stream; `keep_reading(events so far)` returning false hangs up.
template <typename KeepReading>
Stream post_stream(httplib::Client& c, const std::string& path, const json::Value& body,
                   KeepReading keep_reading, const httplib::Headers& headers = {}) {
  Stream s;
  EventStreamReader reader;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = headers;
  req.body = json::dump(body);
  req.set_header("Content-Type", "application/json");
  req.response_handler = [&](const httplib::Response& r) {
    s.status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    s.raw.append(data, n);
    for (const std::string& event : reader.add({data, n})) {
      if (event == "[DONE]") {
        s.done = true;
      } else {
        s.events.push_back(json::parse(event));
      }
    }
    return keep_reading(s.events);
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  c.send(req, res, error);
  if (s.status == 0) s.status = res.status;
  return s;
}

inline Stream post_stream(httplib::Client& c, const std::string& path, const json::Value& body,
                          const httplib::Headers& headers = {}) {
  return post_stream(
      c, path, body, [](const std::vector<json::Value>&) { return true; }, headers);
}

// Streams `body` from the server at `port` on a thread of its own; once `events_before` events have arrived,
// calls `interrupt` (a shutdown, a signal) and reads the stream to its end.
inline Stream stream_interrupted(int port, const std::string& path, const json::Value& body,
                                 size_t events_before, const std::function<void()>& interrupt) {
  std::atomic<bool> started = false;
  Stream s;
  std::thread reader([&] {
    httplib::Client c("127.0.0.1", port);
    s = post_stream(c, path, body, [&](const std::vector<json::Value>& events) {
      started = events.size() >= events_before;
      return true;
    });
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  interrupt();
  reader.join();
  return s;
}

// The value of an unlabelled sample in Prometheus text, or -1 when it is absent.
inline double metric(const std::string& text, const std::string& name) {
  // Searched with a newline before it, so that the name is matched whole; `at` is then where it starts in
  // text.
  const size_t at = ("\n" + text).find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 1));
}

inline std::string metrics_text(httplib::Client& c) {
  const auto r = c.Get("/metrics");
  return r ? r->body : "";
}

// Polls /metrics until `name` reads `value`, for up to `timeout`; returns the last value read.
inline double wait_for_metric(httplib::Client& c, const std::string& name, double value,
                              std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  double v = metric(metrics_text(c), name);
  while (v != value && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    v = metric(metrics_text(c), name);
  }
  return v;
}

}  // namespace tfm::server::test

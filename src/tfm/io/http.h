// A small HTTP client over libcurl, enough for the Hub: HEAD and GET, request headers, redirects followed or
// not, bodies collected or streamed to a callback, and failures of the transport told apart from HTTP errors.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfm/core/error.h"

namespace tfm::io {

// No HTTP answer came, or its body was cut short: connection refused or reset, time-out, DNS failure.
// Callers may retry these or fall back to a cache; HTTP error statuses are not transport errors.
class HttpTransportError : public Error {
 public:
  using Error::Error;
};

// Header names compare without case, as HTTP says.
class HttpHeaders {
 public:
  void add(std::string name, std::string value) { entries_.emplace_back(std::move(name), std::move(value)); }
  // The first value of the header, or nullptr when absent.
  const std::string* find(std::string_view name) const;
  std::string get(std::string_view name) const;  // "" when absent
  void clear() { entries_.clear(); }

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

struct HttpResponse {
  long status = 0;
  HttpHeaders headers;  // of the last response, when redirects were followed
  std::string body;     // collected body; for streamed requests, only the body of a status >= 300
  std::string url;      // the URL that gave this response
};

struct HttpRequest {
  std::string method = "GET";  // "GET" or "HEAD"
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  bool follow_redirects = false;
  // Connecting gives up after timeout_s seconds, and so does a transfer that receives nothing for as long.
  long timeout_s = 10;
  // When set, the body of a 2xx response goes here piece by piece instead of into HttpResponse::body; the
  // status and headers are complete at the first call. Returning false aborts the transfer (a transport
  // error).
  std::function<bool(const HttpResponse& head, std::string_view piece)> on_body;
};

class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Any HTTP status is a response; only transport failures throw (HttpTransportError).
  HttpResponse send(const HttpRequest& request);

 private:
  struct Handle;
  std::unique_ptr<Handle> handle_;
};

// The absolute URL that `location` (absolute or relative, as in a Location header) names from `base`.
std::string url_join(const std::string& base, const std::string& location);
// The host name of an absolute URL, lowercase ("" when there is none).
std::string url_host(const std::string& url);
// Percent-encodes every byte but the unreserved ones (letters, digits, "-._~"); keep_slash leaves '/' as is.
std::string url_escape(std::string_view text, bool keep_slash);

}  // namespace tfm::io

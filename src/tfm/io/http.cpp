#include "tfm/io/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <mutex>

namespace tfm::io {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Error bodies are kept for messages, never more than this.
constexpr size_t kMaxCollectedBody = size_t{64} << 20;

struct Transfer {
  const HttpRequest* request = nullptr;
  CURL* curl = nullptr;
  HttpResponse response;
  bool aborted = false;           // on_body asked to stop
  std::exception_ptr body_error;  // what on_body threw; exceptions must not cross libcurl's C frames
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {
    t->response.headers.clear();  // a new response (after a redirect or a 100 Continue)
  } else if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
    t->response.headers.add(std::string(trim(line.substr(0, colon))),
                            std::string(trim(line.substr(colon + 1))));
  }
  return size * count;
}

size_t on_data(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view piece(data, size * count);
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &t->response.status);
  if (t->request->on_body && t->response.status >= 200 && t->response.status < 300) {
    try {
      if (!t->request->on_body(t->response, piece)) t->aborted = true;
    } catch (...) {
      t->body_error = std::current_exception();
    }
    if (t->aborted || t->body_error) return 0;  // makes curl stop with CURLE_WRITE_ERROR
  } else if (t->response.body.size() < kMaxCollectedBody) {
    t->response.body.append(piece);
  }
  return piece.size();
}

}  // namespace

const std::string* HttpHeaders::find(std::string_view name) const {
  for (const auto& [key, value] : entries_) {
    if (iequals(key, name)) return &value;
  }
  return nullptr;
}

std::string HttpHeaders::get(std::string_view name) const {
  const std::string* value = find(name);
  return value ? *value : std::string();
}

struct HttpClient::Handle {
  CURL* curl = nullptr;
  ~Handle() { curl_easy_cleanup(curl); }
};

HttpClient::HttpClient() : handle_(std::make_unique<Handle>()) {
  global_init();
  handle_->curl = curl_easy_init();
  check(handle_->curl != nullptr, "HTTP: libcurl could not start");
}

HttpClient::~HttpClient() = default;

HttpResponse HttpClient::send(const HttpRequest& request) {
  CURL* curl = handle_->curl;
  curl_easy_reset(curl);  // keeps the open connections, drops the previous request's options
  Transfer transfer;
  transfer.request = &request;
  transfer.curl = curl;

  curl_slist* headers = nullptr;
  for (const std::string& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  const std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(headers, curl_slist_free_all);

  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else {
    check(request.method == "GET", "HTTP: unsupported method ", request.method);
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 20L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, request.timeout_s);
  // A transfer that receives less than one byte per second for timeout_s seconds has stalled.
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, request.timeout_s);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  char error_text[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);

  const CURLcode code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &transfer.response.status);
  char* effective_url = nullptr;
  curl_easy_getinfo(curl, CURLINFO_EFFECTIVE_URL, &effective_url);
  transfer.response.url = effective_url ? effective_url : request.url;
  if (transfer.body_error) std::rethrow_exception(transfer.body_error);
  if (code != CURLE_OK) {
    if (transfer.aborted) throw HttpTransportError(request.method + " " + request.url + ": transfer stopped");
    const std::string reason = error_text[0] ? error_text : curl_easy_strerror(code);
    throw HttpTransportError(request.method + " " + request.url + " failed: " + reason);
  }
  return std::move(transfer.response);
}

std::string url_join(const std::string& base, const std::string& location) {
  global_init();
  const std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> url(curl_url(), curl_url_cleanup);
  check(url != nullptr && curl_url_set(url.get(), CURLUPART_URL, base.c_str(), 0) == CURLUE_OK,
        "HTTP: bad URL ", base);
  check(curl_url_set(url.get(), CURLUPART_URL, location.c_str(), 0) == CURLUE_OK,
        "HTTP: bad redirect location '", location, "' from ", base);
  char* joined = nullptr;
  check(curl_url_get(url.get(), CURLUPART_URL, &joined, 0) == CURLUE_OK, "HTTP: bad redirect from ", base);
  std::string result(joined);
  curl_free(joined);
  return result;
}

std::string url_host(const std::string& text) {
  global_init();
  const std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> url(curl_url(), curl_url_cleanup);
  char* host = nullptr;
  if (url == nullptr || curl_url_set(url.get(), CURLUPART_URL, text.c_str(), 0) != CURLUE_OK ||
      curl_url_get(url.get(), CURLUPART_HOST, &host, 0) != CURLUE_OK) {
    return "";
  }
  std::string result(host);
  curl_free(host);
  std::transform(result.begin(), result.end(), result.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return result;
}

std::string url_escape(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    if (alnum || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace tfm::io

#include "tfm/io/hub_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include "tfm/io/hub_cache.h"
#include "tfm/io/json.h"
#include "tfm/io/progress_bar.h"
#include "tfm/io/sha256.h"

namespace tfm::io {

namespace fs = std::filesystem;

namespace {

// Hosts whose redirects stay "on the Hub" besides the endpoint's own (huggingface_hub's HF_URL_HOSTS).
constexpr const char* kHubHosts[] = {"hf.co", "huggingface.co", "hub-ci.huggingface.co"};

// Attempts of a download in a row that receive nothing before it gives up (as huggingface_hub's http_get).
constexpr int kDownloadAttempts = 5;

std::optional<int64_t> parse_size(const std::string* text) {
  int64_t value = 0;
  if (text == nullptr || text->empty()) return std::nullopt;
  const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc() || end != text->data() + text->size() || value < 0) return std::nullopt;
  return value;
}

// ETag: "abc" or W/"abc" -> abc (huggingface_hub's _normalize_etag).
std::string normalize_etag(std::string etag) {
  etag.erase(0, etag.find_first_not_of("W/"));
  const size_t first = etag.find_first_not_of('"'), last = etag.find_last_not_of('"');
  return first == std::string::npos ? "" : etag.substr(first, last - first + 1);
}

bool is_sha256(const std::string& text) {
  return text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

bool is_redirect(const HttpResponse& r) {
  return (r.status == 301 || r.status == 302 || r.status == 303 || r.status == 307 || r.status == 308) &&
         r.headers.find("Location") != nullptr;
}

// What went wrong, in the terms of the Hub's X-Error-Code, with what to do about it.
[[noreturn]] void throw_status_error(const HttpResponse& r, const std::string& endpoint,
                                     const std::string& repo_id, const std::string& revision,
                                     const std::string& filename, bool token_sent) {
  const std::string code = r.headers.get("X-Error-Code");
  const std::string server_message = r.headers.get("X-Error-Message");
  const std::string status = "HTTP " + std::to_string(r.status);
  const std::string repo = "repository '" + repo_id + "' on " + endpoint;
  const std::string token_advice =
      token_sent ? "check that the token (HF_TOKEN or the token file) is valid and has access to it"
                 : "set HF_TOKEN (or log in with `hf auth login`) to a token of an account that has access";
  if (code == "RevisionNotFound") {
    throw HubStatusError("revision '" + revision + "' not found in " + repo + " (" + status + ")", true);
  }
  if (code == "EntryNotFound") {
    throw HubStatusError(
        "file '" + filename + "' not found in " + repo + " at revision '" + revision + "' (" + status + ")",
        true);
  }
  if (code == "GatedRepo") {
    throw HubStatusError("cannot access gated " + repo + " (" + status + "): request access at " + endpoint +
                             "/" + repo_id + ", then " + token_advice,
                         false);
  }
  if (r.status == 401 || r.status == 404 || code == "RepoNotFound") {
    std::string message = repo + " was not found, or it is private or gated (" + status + "): check the id " +
                          "and revision '" + revision + "'; if the repo is private or gated, " + token_advice;
    if (server_message == "Invalid credentials in Authorization header") {
      message =
          "the token sent to " + endpoint + " is invalid (" + status + "): check HF_TOKEN or the token file";
    }
    throw HubStatusError(message, false);
  }
  if (r.status == 403) {
    throw HubStatusError("access to " + repo + " is forbidden (" + status + ")" +
                             (server_message.empty() ? "" : ": " + server_message) +
                             "; make sure your token (HF_TOKEN) has read access to it",
                         false);
  }
  throw HubStatusError(status + " from " + r.url + (server_message.empty() ? "" : ": " + server_message),
                       false);
}

// A file opened for appending, closed on every path.
class AppendFile {
 public:
  explicit AppendFile(const fs::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    check(fd_ >= 0, "cannot open ", path.string(), ": ", std::strerror(errno));
  }
  ~AppendFile() { ::close(fd_); }
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void write(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      check(n > 0, "cannot write ", path_.string(), ": ", std::strerror(errno));
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }
  void truncate() {
    check(::ftruncate(fd_, 0) == 0, "cannot truncate ", path_.string(), ": ", std::strerror(errno));
  }

 private:
  fs::path path_;
  int fd_;
};

}  // namespace

HubClient::HubClient(const HubSettings& settings, std::chrono::milliseconds retry_delay)
    : settings_(settings), retry_delay_(retry_delay) {}

std::vector<std::string> HubClient::headers(bool with_token) const {
  std::vector<std::string> h = {"User-Agent: tfm"};
  if (with_token && settings_.token) h.push_back("Authorization: Bearer " + *settings_.token);
  return h;
}

bool HubClient::is_hub_host_of(const std::string& url, const std::string& target) const {
  const std::string host = url_host(target);
  if (host == url_host(url) || host == url_host(settings_.endpoint)) return true;
  for (const char* hub : kHubHosts) {
    if (host == hub) return true;
  }
  return false;
}

RepoInfo HubClient::repo_info(const std::string& repo_id, const std::string& revision) {
  HttpRequest request;
  request.url = settings_.endpoint + "/api/models/" + repo_id + "/revision/" + url_escape(revision, false);
  request.headers = headers(true);
  request.follow_redirects = true;  // a renamed repo redirects to its new name
  request.timeout_s = settings_.download_timeout_s;
  const HttpResponse r = http_.send(request);
  if (r.status >= 300)
    throw_status_error(r, settings_.endpoint, repo_id, revision, "", settings_.token.has_value());
  RepoInfo info;
  try {
    const json::Value body = json::parse(r.body);
    info.commit = body.at("sha").as_string();
    for (const json::Value& sibling : body.at("siblings").as_array()) {
      info.files.push_back(sibling.at("rfilename").as_string());
    }
  } catch (const Error& e) {
    throw_error("unexpected answer from ", request.url, " (is HF_ENDPOINT a Hub?): ", e.what());
  }
  check(is_commit_hash(info.commit), "unexpected answer from ", request.url, ": 'sha' is not a commit hash");
  return info;
}

FileMetadata HubClient::file_metadata(const std::string& repo_id, const std::string& revision,
                                      const std::string& filename) {
  HttpRequest request;
  request.method = "HEAD";
  request.url = settings_.endpoint + "/" + repo_id + "/resolve/" + url_escape(revision, false) + "/" +
                url_escape(filename, true);
  request.headers = headers(true);
  request.headers.push_back("Accept-Encoding: identity");  // the size of the file, not of a compressed body
  request.timeout_s = settings_.etag_timeout_s;
  const std::string resolve_url = request.url;
  for (int redirects = 0;; ++redirects) {
    check(redirects < 20, "too many redirects resolving ", resolve_url);
    const HttpResponse r = http_.send(request);
    if (r.status >= 400)
      throw_status_error(r, settings_.endpoint, repo_id, revision, filename, settings_.token.has_value());
    std::string target;
    if (is_redirect(r)) {
      target = url_join(request.url, r.headers.get("Location"));
      if (is_hub_host_of(request.url, target)) {
        request.url = target;
        continue;
      }
    }
    FileMetadata meta;
    meta.commit = r.headers.get("X-Repo-Commit");
    const std::string* etag = r.headers.find("X-Linked-Etag");
    meta.etag = normalize_etag(etag ? *etag : r.headers.get("ETag"));
    meta.size = parse_size(r.headers.find("X-Linked-Size"));
    if (!meta.size && !is_redirect(r)) meta.size = parse_size(r.headers.find("Content-Length"));
    meta.location = target.empty() ? request.url : target;
    check(!meta.commit.empty(), "the answer from ", resolve_url,
          " has no X-Repo-Commit header, so it does not come from a Hugging Face Hub: check HF_ENDPOINT and "
          "any proxy");
    check(!meta.etag.empty(), "the answer from ", resolve_url,
          " has no ETag: the file cannot be cached reliably");
    return meta;
  }
}

void HubClient::download(const FileMetadata& file, const fs::path& blob, const std::string& display_name) {
  const fs::path partial = blob.string() + ".incomplete";
  const bool lfs = is_sha256(file.etag);
  std::error_code ec;
  int64_t have = fs::exists(partial, ec) ? static_cast<int64_t>(fs::file_size(partial)) : 0;
  if (file.size && have > *file.size) {
    fs::remove(partial);
    have = 0;
  }
  Sha256 hash;
  if (lfs && have > 0) hash.update_from_file(partial.string());
  {
    AppendFile out(partial);
    ProgressBar bar(display_name, file.size, have, settings_.progress);
    HttpRequest request;
    request.url = file.location;
    // The token goes to Hub hosts only, never to the CDN a large file is served from.
    request.headers = headers(is_hub_host_of(settings_.endpoint, file.location));
    request.follow_redirects = true;
    request.timeout_s = settings_.download_timeout_s;
    for (int failures = 0; !(file.size && have == *file.size);) {
      HttpRequest attempt = request;
      if (have > 0) attempt.headers.push_back("Range: bytes=" + std::to_string(have) + "-");
      bool first_piece = true;
      int64_t received = 0;
      attempt.on_body = [&](const HttpResponse& head, std::string_view piece) {
        if (first_piece && have > 0 && head.status == 200) {  // the server ignored the Range: start again
          out.truncate();
          hash = Sha256();
          have = 0;
          bar.reset_to(0);
        }
        first_piece = false;
        out.write(piece);
        if (lfs) hash.update(piece);
        have += static_cast<int64_t>(piece.size());
        received += static_cast<int64_t>(piece.size());
        bar.update(static_cast<int64_t>(piece.size()));
        return true;
      };
      try {
        const HttpResponse r = http_.send(attempt);
        if (r.status == 416) fs::remove(partial, ec);  // what was kept does not fit the file: start afresh
        if (r.status >= 300) {
          throw_error("downloading '", display_name, "' failed: HTTP ", r.status, " from ", file.location);
        }
        break;
      } catch (const HttpTransportError& e) {
        failures = received > 0 ? 1 : failures + 1;
        if (failures >= kDownloadAttempts) {
          throw_error("downloading '", display_name, "' failed after ", have, " of ",
                      file.size ? std::to_string(*file.size) : std::string("?"), " bytes: ", e.what(),
                      ". Run again to resume from ", partial.string());
        }
        if (received == 0) std::this_thread::sleep_for(retry_delay_);
      }
    }
  }
  if (file.size && have != *file.size) {
    fs::remove(partial, ec);
    throw_error("consistency check failed: '", display_name, "' should be ", *file.size, " bytes but ", have,
                " were received; nothing was saved, try again");
  }
  if (lfs) {
    const std::string digest = hash.hex_digest();
    if (digest != file.etag) {
      fs::remove(partial, ec);
      throw_error("sha256 check failed for '", display_name, "': the download has sha256 ", digest,
                  " but the Hub says ", file.etag, "; nothing was saved, try again");
    }
  }
  fs::rename(partial, blob);
}

}  // namespace tfm::io

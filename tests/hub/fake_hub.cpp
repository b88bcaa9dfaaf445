#include "fake_hub.h"

#include <openssl/sha.h>

#include <chrono>
#include <memory>
#include <stdexcept>

#include "tfm/io/json.h"
#include "tfm/io/sha256.h"

namespace tfm::test {

namespace {

void hub_error(httplib::Response& res, int status, const std::string& code, const std::string& message) {
  res.status = status;
  res.set_header("X-Error-Code", code);
  res.set_header("X-Error-Message", message);
  res.set_content(json::dump(json::Object{{"error", message}}), "application/json");
}

bool contains(const std::vector<std::string>& list, const std::string& name) {
  for (const std::string& item : list) {
    if (item == name) return true;
  }
  return false;
}

}  // namespace

std::string FakeHub::git_blob_sha1(const std::string& content) {
  const std::string object = "blob " + std::to_string(content.size()) + std::string(1, '\0') + content;
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(object.data()), object.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (const unsigned char byte : digest) {
    hex += kHex[byte >> 4];
    hex += kHex[byte & 15];
  }
  return hex;
}

FakeHub::FakeHub() {
  const char* repo = "([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)?)";
  server_.Get(std::string("/api/models/") + repo + "/revision/(.+)",
              [this](const httplib::Request& req, httplib::Response& res) { serve_api_info(req, res); });
  server_.Get(std::string("/api/resolve-cache/models/") + repo + "/([0-9a-f]{40})/(.+)",
              [this](const httplib::Request& req, httplib::Response& res) { serve_resolve_cache(req, res); });
  server_.Get("/cdn/([0-9a-f]{64})",
              [this](const httplib::Request& req, httplib::Response& res) { serve_cdn(req, res); });
  server_.Get(std::string("/") + repo + "/resolve/([^/]+)/(.+)",
              [this](const httplib::Request& req, httplib::Response& res) { serve_resolve(req, res); });
  // Logged before the answer goes out, so that a client that has its answer finds the request in the log.
  server_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response&) {
    log_request(req);
    return httplib::Server::HandlerResponse::Unhandled;
  });
  port_ = server_.bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("fake hub: cannot bind 127.0.0.1");
  // Connections wait in the bound socket's backlog until the server thread accepts them.
  thread_ = std::thread([this] { server_.listen_after_bind(); });
}

FakeHub::~FakeHub() {
  stop();
}

void FakeHub::stop() {
  if (!thread_.joinable()) return;
  // stop() only ends a server that runs, so wait for the thread to get there.
  while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server_.stop();
  if (thread_.joinable()) thread_.join();
}

void FakeHub::add_repo(const std::string& id, FakeRepo repo) {
  const std::lock_guard lock(mutex_);
  repo.refs.emplace("main", repo.commit);
  for (const std::string& name : repo.lfs) {
    const std::string& content = repo.files.at(name);
    lfs_blobs_[io::sha256_hex(content)] = content;
  }
  repos_[id] = std::move(repo);
}

void FakeHub::drop_connections(std::vector<size_t> after_bytes) {
  const std::lock_guard lock(mutex_);
  drops_.assign(after_bytes.rbegin(), after_bytes.rend());
}

std::vector<LoggedRequest> FakeHub::log() const {
  const std::lock_guard lock(mutex_);
  return log_;
}

void FakeHub::clear_log() {
  const std::lock_guard lock(mutex_);
  log_.clear();
}

void FakeHub::log_request(const httplib::Request& req) {
  const std::lock_guard lock(mutex_);
  log_.push_back(
      {req.method, req.path, req.get_header_value("Range"), req.get_header_value("Authorization")});
}

std::string FakeHub::check_access(const httplib::Request& req, httplib::Response& res,
                                  const std::string& repo_id, const std::string& revision,
                                  bool needs_token) const {
  const bool authorized = req.get_header_value("Authorization") == std::string("Bearer ") + kToken;
  const auto repo = repos_.find(repo_id);
  if (repo == repos_.end()) {
    // The Hub answers 401 to anonymous requests for repos it does not show, 404 to authenticated ones.
    hub_error(res, authorized ? 404 : 401, "RepoNotFound", "Repository not found");
    return "";
  }
  if (needs_token && repo->second.gated && !authorized) {
    hub_error(res, 401, "GatedRepo",
              "Access to model " + repo_id +
                  " is restricted. You must have access to it and be authenticated "
                  "to access it. Please log in.");
    return "";
  }
  if (revision == repo->second.commit) return revision;
  const auto ref = repo->second.refs.find(revision);
  if (ref == repo->second.refs.end()) {
    hub_error(res, 404, "RevisionNotFound", "Invalid rev id: " + revision);
    return "";
  }
  return ref->second;
}

void FakeHub::serve_api_info(const httplib::Request& req, httplib::Response& res) {
  const std::lock_guard lock(mutex_);
  const std::string repo_id = req.matches[1], revision = req.matches[2];
  const std::string commit = check_access(req, res, repo_id, revision, false);
  if (commit.empty()) return;
  json::Array siblings;
  for (const auto& [name, content] : repos_.at(repo_id).files)
    siblings.push_back(json::Object{{"rfilename", name}});
  const json::Object info = {
      {"_id", "0123"},    {"id", repo_id},
      {"private", false}, {"gated", repos_.at(repo_id).gated ? json::Value("auto") : json::Value(false)},
      {"sha", commit},    {"siblings", siblings}};
  res.set_content(json::dump(info), "application/json");
}

void FakeHub::serve_resolve(const httplib::Request& req, httplib::Response& res) {
  const std::lock_guard lock(mutex_);
  const std::string repo_id = req.matches[1], revision = req.matches[2], file = req.matches[3];
  const std::string commit = check_access(req, res, repo_id, revision, true);
  if (commit.empty()) return;
  const FakeRepo& repo = repos_.at(repo_id);
  res.set_header("X-Repo-Commit", commit);
  const auto entry = repo.files.find(file);
  if (entry == repo.files.end()) {
    hub_error(res, 404, "EntryNotFound", file + " does not exist on \"" + revision + "\"");
    return;
  }
  if (contains(repo.lfs, file)) {
    const std::string sha256 = io::sha256_hex(entry->second);
    const std::string pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:" + sha256 +
                                "\nsize " + std::to_string(entry->second.size()) + "\n";
    res.status = 302;
    res.set_header("Location",
                   "http://localhost:" + std::to_string(port_) + "/cdn/" + sha256 + "?X-Signature=abc");
    res.set_header("ETag", "\"" + git_blob_sha1(pointer) + "\"");
    res.set_header("X-Linked-Etag", "\"" + sha256 + "\"");
    res.set_header("X-Linked-Size", std::to_string(entry->second.size()));
    res.set_content("Found. Redirecting to /cdn/" + sha256, "text/plain");
    return;
  }
  res.status = 307;
  res.set_header("Location", "/api/resolve-cache/models/" + repo_id + "/" + commit + "/" + file);
  res.set_content("Temporary Redirect.", "text/plain");
}

void FakeHub::serve_resolve_cache(const httplib::Request& req, httplib::Response& res) {
  const std::lock_guard lock(mutex_);
  const std::string repo_id = req.matches[1], commit = req.matches[2], file = req.matches[3];
  if (check_access(req, res, repo_id, commit, true).empty()) return;
  const std::string& content = repos_.at(repo_id).files.at(file);
  res.set_header("X-Repo-Commit", commit);
  res.set_header("ETag", "\"" + git_blob_sha1(content) + "\"");
  res.set_content(content, "application/octet-stream");
}

void FakeHub::serve_cdn(const httplib::Request& req, httplib::Response& res) {
  if (req.has_header("Authorization")) {
    res.status = 400;
    res.set_content("the CDN must not receive the Hub token", "text/plain");
    return;
  }
  auto content = std::make_shared<std::string>();
  size_t drop = SIZE_MAX;  // a dropped connection: the provider stops after `drop` bytes of this body
  {
    const std::lock_guard lock(mutex_);
    if (!drops_.empty()) {
      drop = drops_.back();
      drops_.pop_back();
    }
    const auto blob = lfs_blobs_.find(req.matches[1]);
    if (blob == lfs_blobs_.end()) {
      res.status = 404;
      return;
    }
    *content = blob->second;
  }
  if (corrupt_lfs_ && !content->empty()) (*content)[content->size() / 2] ^= 0x55;
  auto sent = std::make_shared<size_t>(0);
  res.set_header("Content-Disposition", "inline; filename=\"blob\"");
  if (ignore_ranges_) {  // httplib applies a Range to sized bodies only, and says 206 unless told otherwise
    res.status = 200;
    res.set_chunked_content_provider(
        "application/octet-stream", [content](size_t offset, httplib::DataSink& sink) {
          sink.write(content->data() + offset, std::min<size_t>(content->size() - offset, 4096));
          if (offset + 4096 >= content->size()) sink.done();
          return true;
        });
    return;
  }
  res.set_content_provider(content->size(), "application/octet-stream",
                           [content, drop, sent](size_t offset, size_t length, httplib::DataSink& sink) {
                             size_t n = std::min<size_t>(length, 4096);
                             if (*sent + n > drop) n = drop - *sent;
                             if (n > 0) sink.write(content->data() + offset, n);
                             *sent += n;
                             return *sent < drop;
                           });
}

}  // namespace tfm::test

// A stand-in for the Hugging Face Hub on 127.0.0.1 (an ephemeral port), serving repos with the Hub's
// endpoints and headers:
//   GET  /api/models/{repo}/revision/{rev}         {"id", "sha", "siblings": [{"rfilename"}]}
//   HEAD/GET /{repo}/resolve/{rev}/{file}          regular file: 307 to
//   /api/resolve-cache/models/{repo}/{sha}/{file}
//                                                  (200 there with ETag = git sha1, X-Repo-Commit,
//                                                  Content-Length); LFS file: 302 to
//                                                  http://localhost:{port}/cdn/{sha256} (another host name,
//                                                  as the Hub's CDN) with X-Linked-Etag, X-Linked-Size
//   GET  /cdn/{sha256}                             the bytes, with Range support; 400 if sent an
//   Authorization
// Errors as the Hub gives them: 401 GatedRepo, 401/404 RepoNotFound, 404 RevisionNotFound / EntryNotFound.
// Faults on demand: a connection dropped midway through CDN bodies, a corrupted LFS body.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tfm::test {

struct FakeRepo {
  std::string commit;                        // 40 hex digits
  std::map<std::string, std::string> refs;   // branch or tag -> commit; "main" -> commit is added
  std::map<std::string, std::string> files;  // name -> content
  std::vector<std::string> lfs;              // the names of files stored with LFS
  bool gated = false;                        // files need the token (the listing does not, as on the Hub)
};

struct LoggedRequest {
  std::string method, path, range, authorization;
};

class FakeHub {
 public:
  static constexpr const char* kToken = "hf_fake_token";

  FakeHub();
  ~FakeHub();
  FakeHub(const FakeHub&) = delete;
  FakeHub& operator=(const FakeHub&) = delete;

  void add_repo(const std::string& id, FakeRepo repo);
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void stop();

  // The next CDN bodies stop after these many bytes each, closing the connection.
  void drop_connections(std::vector<size_t> after_bytes);
  void corrupt_lfs(bool on) { corrupt_lfs_ = on; }
  // The CDN answers a Range request with the whole body (200, chunked), as some proxies do.
  void ignore_ranges(bool on) { ignore_ranges_ = on; }

  std::vector<LoggedRequest> log() const;
  void clear_log();

  static std::string git_blob_sha1(const std::string& content);

 private:
  void log_request(const httplib::Request& req);
  // The commit a revision names, or "" (after answering with the Hub's error).
  std::string check_access(const httplib::Request& req, httplib::Response& res, const std::string& repo_id,
                           const std::string& revision, bool needs_token) const;
  void serve_api_info(const httplib::Request& req, httplib::Response& res);
  void serve_resolve(const httplib::Request& req, httplib::Response& res);
  void serve_resolve_cache(const httplib::Request& req, httplib::Response& res);
  void serve_cdn(const httplib::Request& req, httplib::Response& res);

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::map<std::string, FakeRepo> repos_;
  std::map<std::string, std::string> lfs_blobs_;  // sha256 -> content
  std::vector<size_t> drops_;                     // in reverse order; guarded by mutex_
  std::atomic<bool> corrupt_lfs_{false};
  std::atomic<bool> ignore_ranges_{false};
  mutable std::mutex mutex_;  // guards repos_, lfs_blobs_ and log_ against the server's threads
  std::vector<LoggedRequest> log_;
};

}  // namespace tfm::test

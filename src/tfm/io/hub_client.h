// The Hub's HTTP API as huggingface_hub calls it: the repo listing, a file's metadata from a HEAD on its
// /resolve/ URL, and the download of a file's bytes into a blob of the cache (resumed, checked, then
// renamed).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tfm/io/http.h"
#include "tfm/io/hub.h"

namespace tfm::io {

// An error status from the Hub. Repos that are missing, private or gated, and other failures may still be
// served from the cache; a missing revision or file never is (huggingface_hub decides the same way).
class HubStatusError : public Error {
 public:
  HubStatusError(const std::string& message, bool missing_revision_or_file)
      : Error(message), missing_revision_or_file(missing_revision_or_file) {}
  bool missing_revision_or_file;
};

struct RepoInfo {
  std::string commit;              // "sha"
  std::vector<std::string> files;  // the siblings' "rfilename"
};

struct FileMetadata {
  std::string commit;           // X-Repo-Commit
  std::string etag;             // X-Linked-Etag or ETag, without quotes: the blob's name
  std::optional<int64_t> size;  // X-Linked-Size, or Content-Length of a response that is not a redirect
  std::string location;         // where to GET the bytes (a CDN URL when the Hub redirects there)
};

class HubClient {
 public:
  // Uses the settings' endpoint, token, progress and time-outs. A download attempt that receives nothing is
  // retried after retry_delay (huggingface_hub waits 1 s).
  explicit HubClient(const HubSettings& settings,
                     std::chrono::milliseconds retry_delay = std::chrono::seconds(1));

  // GET {endpoint}/api/models/{repo_id}/revision/{revision}.
  RepoInfo repo_info(const std::string& repo_id, const std::string& revision);
  // HEAD {endpoint}/{repo_id}/resolve/{revision}/{filename}, following redirects only while they stay on a
  // Hub host: a redirect to a CDN carries the metadata itself, and the token must not go there.
  FileMetadata file_metadata(const std::string& repo_id, const std::string& revision,
                             const std::string& filename);
  // Downloads the file into `blob` through blob.incomplete, resuming what an earlier attempt left there (HTTP
  // Range), retrying a dropped connection, and checking the size and, for LFS files (whose ETag is their
  // sha256), the sha256, before the rename. A failed check deletes the partial file; an interrupted download
  // keeps it for the next attempt. The caller holds the blob's lock.
  void download(const FileMetadata& file, const std::filesystem::path& blob, const std::string& display_name);

 private:
  std::vector<std::string> headers(bool with_token) const;
  bool is_hub_host_of(const std::string& url, const std::string& target) const;

  HubSettings settings_;
  std::chrono::milliseconds retry_delay_;
  HttpClient http_;
};

}  // namespace tfm::io

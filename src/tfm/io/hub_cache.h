// The Hugging Face Hub cache on disk, laid out exactly as huggingface_hub lays it out, so that tfm and Python
// share one cache:
//
//   $HF_HUB_CACHE/models--{org}--{name}/
//     refs/{revision}                  the commit hash the branch or tag pointed to when last resolved
//     blobs/{etag}                     file contents, named by ETag (sha256 for LFS files, git sha1
//     otherwise) blobs/{etag}.incomplete          a download in progress (resumed from its size)
//     snapshots/{commit}/{file}        relative symlinks to ../../blobs/{etag}
//   $HF_HUB_CACHE/.locks/models--{org}--{name}/{etag}.lock   one writer per blob (flock, as Python's
//   filelock)
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace tfm::io {

// "org/name" -> "models--org--name" (huggingface_hub's repo_folder_name for models).
std::string repo_folder_name(const std::string& repo_id);

// True for a full 40-hex-digit lowercase commit hash (huggingface_hub's REGEX_COMMIT_HASH).
bool is_commit_hash(const std::string& revision);

class RepoCache {
 public:
  RepoCache(std::filesystem::path hub_cache, const std::string& repo_id);

  const std::filesystem::path& folder() const { return folder_; }
  std::filesystem::path blob_path(const std::string& etag) const;
  std::filesystem::path lock_path(const std::string& etag) const;
  std::filesystem::path snapshot_dir(const std::string& commit) const;
  // The snapshot entry of a file ("a/b.json" -> snapshots/{commit}/a/b.json); the name must stay inside.
  std::filesystem::path pointer_path(const std::string& commit, const std::string& filename) const;

  // The commit a revision names: itself when it is a commit hash, else the content of refs/{revision}.
  std::optional<std::string> commit_for(const std::string& revision) const;
  // Records refs/{revision} = commit (atomically, and only when it changed); nothing for a commit hash.
  void write_ref(const std::string& revision, const std::string& commit) const;
  // Points snapshots/{commit}/{filename} at blobs/{etag} with a relative symlink, replacing what was there.
  void link_snapshot(const std::string& commit, const std::string& filename, const std::string& etag) const;

 private:
  std::filesystem::path hub_cache_;
  std::string folder_name_;
  std::filesystem::path folder_;
};

// Holds an exclusive flock on a lock file (created with its folders) for the object's lifetime.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace tfm::io

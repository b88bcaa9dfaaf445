#include "tfm/io/hub_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include "tfm/core/error.h"
#include "tfm/io/file.h"

namespace tfm::io {

namespace fs = std::filesystem;

namespace {

// A name from the Hub (a file of the repo, a revision) that becomes a path under the cache: relative, with no
// empty, "." or ".." part, so it cannot leave the folder it is put in.
void check_relative_name(const std::string& name, const char* what) {
  bool ok = !name.empty() && name.front() != '/' && name.find('\\') == std::string::npos &&
            name.find('\0') == std::string::npos;
  for (size_t start = 0; ok && start <= name.size();) {
    const size_t end = std::min(name.find('/', start), name.size());
    const std::string_view part(name.data() + start, end - start);
    ok = !part.empty() && part != "." && part != "..";
    start = end + 1;
  }
  check(ok, "invalid ", what, " '", name, "': it must be a relative path without '.' or '..' parts");
}

}  // namespace

std::string repo_folder_name(const std::string& repo_id) {
  std::string name = "models";
  size_t start = 0;
  for (size_t slash; (slash = repo_id.find('/', start)) != std::string::npos; start = slash + 1) {
    name += "--" + repo_id.substr(start, slash - start);
  }
  return name + "--" + repo_id.substr(start);
}

bool is_commit_hash(const std::string& revision) {
  return revision.size() == 40 && revision.find_first_not_of("0123456789abcdef") == std::string::npos;
}

RepoCache::RepoCache(fs::path hub_cache, const std::string& repo_id)
    : hub_cache_(std::move(hub_cache)),
      folder_name_(repo_folder_name(repo_id)),
      folder_(hub_cache_ / folder_name_) {}

fs::path RepoCache::blob_path(const std::string& etag) const {
  check_relative_name(etag, "ETag");
  check(etag.find('/') == std::string::npos, "invalid ETag '", etag, "'");
  return folder_ / "blobs" / etag;
}

fs::path RepoCache::lock_path(const std::string& etag) const {
  return hub_cache_ / ".locks" / folder_name_ / (blob_path(etag).filename().string() + ".lock");
}

fs::path RepoCache::snapshot_dir(const std::string& commit) const {
  check_relative_name(commit, "commit");
  check(commit.find('/') == std::string::npos, "invalid commit '", commit, "'");
  return folder_ / "snapshots" / commit;
}

fs::path RepoCache::pointer_path(const std::string& commit, const std::string& filename) const {
  check_relative_name(filename, "file name");
  return snapshot_dir(commit) / filename;
}

std::optional<std::string> RepoCache::commit_for(const std::string& revision) const {
  if (is_commit_hash(revision)) return revision;
  check_relative_name(revision, "revision");
  const fs::path ref = folder_ / "refs" / revision;
  std::error_code ec;
  if (!fs::is_regular_file(ref, ec)) return std::nullopt;
  std::string commit = read_file(ref.string());
  if (commit.empty()) return std::nullopt;
  return commit;
}

void RepoCache::write_ref(const std::string& revision, const std::string& commit) const {
  if (revision == commit) return;
  check_relative_name(revision, "revision");
  const fs::path ref = folder_ / "refs" / revision;
  if (commit_for(revision) == commit) return;  // unchanged: a read-only cache stays usable
  fs::create_directories(ref.parent_path());
  // Written to a temporary file and renamed, so that a concurrent reader never sees half a hash.
  const fs::path tmp = ref.string() + "." + std::to_string(::getpid()) + "-" +
                       std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id())) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << commit;
    check(out.good(), "cannot write ", tmp.string());
  }
  fs::rename(tmp, ref);
}

void RepoCache::link_snapshot(const std::string& commit, const std::string& filename,
                              const std::string& etag) const {
  const fs::path pointer = pointer_path(commit, filename);
  const fs::path blob = blob_path(etag);
  fs::create_directories(pointer.parent_path());
  std::error_code ec;
  fs::remove(pointer, ec);
  // Relative, as huggingface_hub makes them, so that a moved or mounted cache keeps working.
  fs::create_symlink(blob.lexically_relative(pointer.parent_path()), pointer);
}

FileLock::FileLock(const fs::path& path) {
  fs::create_directories(path.parent_path());
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  check(fd_ >= 0, "cannot open lock file ", path.string(), ": ", std::strerror(errno));
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) {
      const int error = errno;
      ::close(fd_);
      throw_error("cannot lock ", path.string(), ": ", std::strerror(error));
    }
  }
}

FileLock::~FileLock() {
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
}

}  // namespace tfm::io

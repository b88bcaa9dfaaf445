#include "tfm/train/checkpoint_folder.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <utility>

#include "tfm/core/error.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "checkpoint-";

// The step of a folder named checkpoint-{digits}...: sort_checkpoints reads the digits after the prefix and
// ignores what follows them; get_last_checkpoint (`exact`) takes only names that end there.
std::optional<int64_t> step_of(std::string_view name, bool exact) {
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::string_view rest = name.substr(kPrefix.size());
  int64_t step = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), step);
  if (ec != std::errc() || end == rest.data() || rest[0] == '-') return std::nullopt;
  if (exact && end != rest.data() + rest.size()) return std::nullopt;
  return step;
}

// The checkpoint folders of output_dir with their steps, in directory order; none when it does not exist.
std::vector<std::pair<int64_t, std::string>> checkpoints_in(const std::string& output_dir, bool exact) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(output_dir, ec)) {
    std::error_code dir_ec;
    if (!entry.is_directory(dir_ec)) continue;
    if (const std::optional<int64_t> step = step_of(entry.path().filename().string(), exact))
      found.emplace_back(*step, (fs::path(output_dir) / entry.path().filename()).string());
  }
  return found;
}

}  // namespace

std::string checkpoint_folder_name(int64_t global_step) {
  return std::string(kPrefix) + std::to_string(global_step);
}

CheckpointWriter::CheckpointWriter(const std::string& output_dir, int64_t global_step)
    : temporary_((fs::path(output_dir) / ("tmp-" + checkpoint_folder_name(global_step))).string()),
      final_((fs::path(output_dir) / checkpoint_folder_name(global_step)).string()) {
  std::error_code ec;
  fs::remove_all(temporary_, ec);  // what a crashed run left unfinished
  fs::create_directories(temporary_, ec);
  check(!ec, "cannot create the checkpoint folder ", temporary_, ": ", ec.message());
}

CheckpointWriter::~CheckpointWriter() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(temporary_, ec);
}

std::string CheckpointWriter::commit() {
  std::error_code ec;
  // A folder cannot be renamed over a non-empty one: an older checkpoint of this step (a run resumed from an
  // earlier one) is moved aside first and removed once the new one is in place.
  const std::string replaced = temporary_ + "-replaced";
  const bool had_old = fs::exists(final_, ec);
  if (had_old) {
    fs::remove_all(replaced, ec);
    fs::rename(final_, replaced, ec);
    check(!ec, "cannot replace the checkpoint ", final_, ": ", ec.message());
  }
  fs::rename(temporary_, final_, ec);
  check(!ec, "cannot move the checkpoint ", temporary_, " to ", final_, ": ", ec.message());
  committed_ = true;
  if (had_old) fs::remove_all(replaced, ec);
  return final_;
}

std::vector<std::string> sorted_checkpoints(const std::string& output_dir) {
  std::vector<std::pair<int64_t, std::string>> found = checkpoints_in(output_dir, /*exact=*/false);
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::vector<std::string> rotate_checkpoints(const std::string& output_dir,
                                            std::optional<int64_t> save_total_limit) {
  std::vector<std::string> deleted;
  if (!save_total_limit || *save_total_limit <= 0) return deleted;
  const std::vector<std::string> checkpoints = sorted_checkpoints(output_dir);
  const size_t limit = static_cast<size_t>(*save_total_limit);
  if (checkpoints.size() <= limit) return deleted;
  // The newest is kept for resuming, so at least one remains; the rest go oldest first.
  const size_t keep = std::max<size_t>(limit, 1);
  for (size_t i = 0; i + 1 < checkpoints.size() && checkpoints.size() - deleted.size() > keep; ++i) {
    std::error_code ec;  // as shutil.rmtree(ignore_errors=True)
    fs::remove_all(checkpoints[i], ec);
    deleted.push_back(checkpoints[i]);
  }
  return deleted;
}

std::optional<std::string> last_checkpoint(const std::string& output_dir) {
  const std::vector<std::pair<int64_t, std::string>> found = checkpoints_in(output_dir, /*exact=*/true);
  if (found.empty()) return std::nullopt;
  // max() keeps the first of equal steps; equal steps need two spellings of one number (checkpoint-07).
  const auto newest = std::max_element(found.begin(), found.end(),
                                       [](const auto& a, const auto& b) { return a.first < b.first; });
  return newest->second;
}

std::optional<std::string> resolve_resume_checkpoint(const std::optional<std::string>& resume_from_checkpoint,
                                                     const std::string& output_dir) {
  if (!resume_from_checkpoint || *resume_from_checkpoint == "false" || *resume_from_checkpoint == "False")
    return std::nullopt;
  if (*resume_from_checkpoint == "true" || *resume_from_checkpoint == "True") {
    std::optional<std::string> last = last_checkpoint(output_dir);
    check(last.has_value(), "No valid checkpoint found in output directory (", output_dir, ")");
    return last;
  }
  std::error_code ec;
  check(fs::is_directory(*resume_from_checkpoint, ec), "Can't find a valid checkpoint at ",
        *resume_from_checkpoint);
  return resume_from_checkpoint;
}

}  // namespace tfm

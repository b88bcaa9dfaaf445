// Checkpoint folders as the Trainer names, finds and rotates them (trainer.py and trainer_utils.py, 5.17.0):
// output_dir/checkpoint-{global_step}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tfm {

// "checkpoint-{global_step}".
std::string checkpoint_folder_name(int64_t global_step);

// Writes one checkpoint: files go into a temporary sibling folder, tmp-checkpoint-{step} (a name that neither
// Transformers' checkpoint search nor tfm's matches), which commit() renames to checkpoint-{step}. A crash, or
// an exception before commit(), leaves no checkpoint-{step} for resume to take; the destructor removes the
// unfinished folder.
class CheckpointWriter {
 public:
  CheckpointWriter(const std::string& output_dir, int64_t global_step);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // The folder to write the checkpoint's files into.
  const std::string& dir() const { return temporary_; }
  // Moves the finished folder into place, replacing an older checkpoint of the same step; returns its path.
  std::string commit();

 private:
  std::string temporary_;
  std::string final_;
  bool committed_ = false;
};

// The checkpoint-* folders of output_dir, oldest first by the number after "checkpoint-" (as
// trainer_utils.sort_checkpoints with use_mtime=False; the Trainer's mtime order is the same for one run).
std::vector<std::string> sorted_checkpoints(const std::string& output_dir);

// trainer_utils.rotate_checkpoints without a best model: deletes the oldest checkpoints until at most
// save_total_limit remain, never the newest. Nothing when the limit is unset or <= 0. Returns the deleted
// folders.
std::vector<std::string> rotate_checkpoints(const std::string& output_dir, std::optional<int64_t> save_total_limit);

// trainer_utils.get_last_checkpoint: the checkpoint-{N} folder (exactly that name) with the largest N, or
// nullopt when there is none.
std::optional<std::string> last_checkpoint(const std::string& output_dir);

// The checkpoint a run resumes from, as Trainer.train(resume_from_checkpoint=...) resolves it: nullopt for
// none or "false"; "true" for the last checkpoint of output_dir ("No valid checkpoint found in output
// directory (...)" when there is none); else the folder, which must exist ("Can't find a valid checkpoint
// at ...").
std::optional<std::string> resolve_resume_checkpoint(const std::optional<std::string>& resume_from_checkpoint,
                                                     const std::string& output_dir);

}  // namespace tfm

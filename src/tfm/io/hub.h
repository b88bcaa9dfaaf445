// Model folders from the Hugging Face Hub: `resolve_model_dir("org/name")` downloads the files a model needs
// into the cache huggingface_hub uses (see hub_cache.h) and returns the snapshot folder; a local folder is
// returned as it is. Settings come from the same environment variables as in Python.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tfm::io {

struct HubOptions {
  std::string revision = "main";         // branch, tag or commit hash
  std::optional<std::string> token;      // overrides HF_TOKEN and the token file
  std::optional<std::string> endpoint;   // overrides HF_ENDPOINT
  std::optional<std::string> cache_dir;  // overrides HF_HUB_CACHE
  bool offline = false;                  // as HF_HUB_OFFLINE=1: use the cache only
  bool progress = true;                  // progress bars on stderr (only ever drawn on a terminal)
  bool weights = true;                   // false: every file but the weights (what a tokenizer needs)
};

// What the options and the environment resolve to, as huggingface_hub's constants would:
//   HF_HOME       $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface
//   hub cache     $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub
//   endpoint      $HF_ENDPOINT, else https://huggingface.co (without a trailing '/')
//   token         $HF_TOKEN, else $HUGGING_FACE_HUB_TOKEN, else the file $HF_TOKEN_PATH (default
//   $HF_HOME/token);
//                 none when HF_HUB_DISABLE_IMPLICIT_TOKEN is true
//   offline       HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is 1/ON/YES/TRUE
//   progress      off when HF_HUB_DISABLE_PROGRESS_BARS is true
//   time-outs     $HF_HUB_ETAG_TIMEOUT (file metadata), $HF_HUB_DOWNLOAD_TIMEOUT (the rest), in seconds, 10
//   by
//                 default: for connecting, and for a transfer that receives nothing
struct HubSettings {
  std::string hub_cache;
  std::string endpoint;
  std::optional<std::string> token;
  bool offline = false;
  bool progress = true;
  long etag_timeout_s = 10;
  long download_timeout_s = 10;
};
HubSettings hub_settings(const HubOptions& options);

// Throws tfm::Error unless `id` is a Hub repo id: "name" or "org/name", ASCII letters, digits, '-', '_', '.',
// each part at most 96 long, starting and ending with a letter, digit or '_', no "--" or "..", no ".git" end.
void validate_repo_id(const std::string& id);

// The files tfm takes from a model repo whose listing is `repo_files`, in this order, skipping those the repo
// lacks: config.json, generation_config.json, the tokenizer files, the chat templates, then (with `weights`)
// the weights: model.safetensors.index.json when the repo has it (its shards come from index_shards), else
// model.safetensors.
std::vector<std::string> model_files(const std::vector<std::string>& repo_files, bool weights = true);
// The shard files a model.safetensors.index.json names (its weight_map's values, sorted, once each, as
// Transformers reads them); errors name `index_path`.
std::vector<std::string> index_shards(const std::string& index_path);

// A local folder as it is, or the snapshot folder of Hub repo `id_or_path` at options.revision, downloading
// what is missing. Offline (or when the Hub cannot be reached) the cached snapshot is used if it holds the
// model. Errors name the repo, the revision and what to do (a gated or private repo: set HF_TOKEN).
std::string resolve_model_dir(const std::string& id_or_path, const HubOptions& options = {});

}  // namespace tfm::io

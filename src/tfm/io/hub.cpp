#include "tfm/io/hub.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tfm/core/error.h"
#include "tfm/io/env.h"
#include "tfm/io/hub_cache.h"
#include "tfm/io/hub_client.h"
#include "tfm/io/json.h"
#include "tfm/io/progress_bar.h"

namespace tfm::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kSingleWeightsFile = "model.safetensors";
// Everything but the weights, in the order they are fetched.
constexpr const char* kModelFiles[] = {
    "config.json",           "generation_config.json",  "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "chat_template.jinja",   "chat_template.json",
};

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::optional<std::string>(value) : std::nullopt;
}

// A time-out in whole seconds; unset, empty or 0 means the default, 10 (as huggingface_hub's `int(v) or 10`).
long env_seconds(const char* name) {
  const std::string value = env(name).value_or("");
  long seconds = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  check(value.empty() || (error == std::errc() && end == value.data() + value.size() && seconds >= 0), name,
        "='", value, "' is not a number of seconds");
  return seconds > 0 ? seconds : 10;
}

std::string home_dir(const std::string& user) {
  if (user.empty()) {
    if (const char* home = std::getenv("HOME")) return home;
    if (const passwd* pw = ::getpwuid(::getuid())) return pw->pw_dir;
  } else if (const passwd* pw = ::getpwnam(user.c_str())) {
    return pw->pw_dir;
  }
  return "";
}

// os.path.expandvars(os.path.expanduser(path)): a leading ~ or ~user, then $NAME and ${NAME} of variables
// that are set (others stay as written).
std::string expand_path(const std::string& path) {
  std::string p = path;
  if (p.starts_with("~")) {
    const size_t slash = std::min(p.find('/'), p.size());
    const std::string home = home_dir(p.substr(1, slash - 1));
    if (!home.empty()) p = home + p.substr(slash);
  }
  std::string out;
  for (size_t i = 0; i < p.size();) {
    if (p[i] == '$') {
      const bool braced = i + 1 < p.size() && p[i + 1] == '{';
      size_t start = i + (braced ? 2 : 1), end = start;
      while (end < p.size() && (std::isalnum(static_cast<unsigned char>(p[end])) || p[end] == '_')) ++end;
      const bool closed = !braced || (end < p.size() && p[end] == '}');
      if (end > start && closed) {
        if (const char* value = std::getenv(p.substr(start, end - start).c_str())) {
          out += value;
          i = end + (braced ? 1 : 0);
          continue;
        }
      }
    }
    out += p[i++];
  }
  return out;
}

std::optional<std::string> clean_token(std::string token) {
  std::erase(token, '\r');
  std::erase(token, '\n');
  const char* space = " \t\f\v";
  const size_t first = token.find_first_not_of(space), last = token.find_last_not_of(space);
  if (first == std::string::npos) return std::nullopt;
  return token.substr(first, last - first + 1);
}

// huggingface_hub's get_token: HF_TOKEN, else HUGGING_FACE_HUB_TOKEN, else the token file, each cleaned.
std::optional<std::string> token_from_environment(const std::string& hf_home) {
  std::optional<std::string> from_env = env("HF_TOKEN");
  if (!from_env || from_env->empty()) from_env = env("HUGGING_FACE_HUB_TOKEN");
  if (from_env) {
    if (auto token = clean_token(*from_env)) return token;
  }
  std::ifstream file(expand_path(env("HF_TOKEN_PATH").value_or(hf_home + "/token")), std::ios::binary);
  if (!file) return std::nullopt;
  std::ostringstream text;
  text << file.rdbuf();
  return clean_token(text.str());
}

// Why `id` is not a Hub repo id (huggingface_hub's validate_repo_id), or "" when it is one.
std::string repo_id_problem(const std::string& id) {
  const auto word = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  };
  const auto valid_part = [&](std::string_view part) {
    return !part.empty() && part.size() <= 96 && word(part.front()) && word(part.back()) &&
           std::all_of(part.begin(), part.end(), [&](char c) { return word(c) || c == '-' || c == '.'; });
  };
  const size_t slash = id.find('/');
  const std::string_view name = slash == std::string::npos ? id : std::string_view(id).substr(slash + 1);
  if (!valid_part(name) ||
      (slash != std::string::npos && !valid_part(std::string_view(id).substr(0, slash)))) {
    return "use 'name' or 'org/name' with letters, digits, '-', '_' and '.', each part at most 96 long and "
           "not starting or ending with '-' or '.'";
  }
  if (id.find("--") != std::string::npos || id.find("..") != std::string::npos)
    return "it contains '--' or '..'";
  if (id.ends_with(".git")) return "it ends with '.git'";
  return "";
}

bool contains(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

std::string describe(const std::string& repo_id, const std::string& revision) {
  return "'" + repo_id + "' (revision '" + revision + "')";
}

// The files of a cached snapshot that must be there for it to stand for the model: config.json, and every
// shard its index names. Returns what is missing.
std::vector<std::string> missing_in_snapshot(const fs::path& snapshot) {
  std::vector<std::string> missing;
  std::error_code ec;
  // exists() follows the symlinks, so a snapshot entry whose blob is gone counts as missing.
  if (!fs::exists(snapshot / "config.json", ec)) missing.push_back("config.json");
  if (fs::exists(snapshot / kIndexFile, ec)) {
    for (const std::string& shard : index_shards((snapshot / kIndexFile).string())) {
      if (!fs::exists(snapshot / shard, ec)) missing.push_back(shard);
    }
  }
  return missing;
}

// The cached snapshot of the revision, for when the Hub is not asked (offline) or cannot answer; when there
// is none that holds the model, `problem` says what is missing.
std::optional<std::string> find_cached_snapshot(const RepoCache& cache, const std::string& repo_id,
                                                const std::string& revision, std::string& problem) {
  const std::optional<std::string> commit = cache.commit_for(revision);
  std::error_code ec;
  if (!commit || !fs::is_directory(cache.snapshot_dir(*commit), ec)) {
    problem = "cannot find " + describe(repo_id, revision) + " in the Hub cache " + cache.folder().string() +
              (commit ? " (no snapshots/" + *commit + ")" : " (no refs/" + revision + ")");
    return std::nullopt;
  }
  const fs::path snapshot = cache.snapshot_dir(*commit);
  const std::vector<std::string> missing = missing_in_snapshot(snapshot);
  if (!missing.empty()) {
    std::string list;
    for (const std::string& name : missing) list += (list.empty() ? "" : ", ") + name;
    problem =
        "the cached snapshot " + snapshot.string() + " of " + describe(repo_id, revision) + " lacks " + list;
    return std::nullopt;
  }
  return snapshot.string();
}

// Makes snapshots/{commit}/{filename} of the cache, downloading its blob unless the cache has it.
void fetch(HubClient& hub, const RepoCache& cache, const std::string& repo_id, const std::string& commit,
           const std::string& filename) {
  const fs::path pointer = cache.pointer_path(commit, filename);
  std::error_code ec;
  if (fs::exists(pointer, ec)) return;
  const FileMetadata meta = hub.file_metadata(repo_id, commit, filename);
  const fs::path blob = cache.blob_path(meta.etag);
  fs::create_directories(blob.parent_path());
  // Another process or thread may have fetched the file meanwhile: look again under the lock.
  const FileLock lock(cache.lock_path(meta.etag));
  if (!fs::exists(blob, ec)) hub.download(meta, blob, filename);
  if (!fs::exists(pointer, ec)) cache.link_snapshot(commit, filename, meta.etag);
}

std::string download_snapshot(const HubSettings& settings, const std::string& repo_id,
                              const std::string& revision, bool weights) {
  check(!revision.empty(), "no revision given for '", repo_id, "' (the default is 'main')");
  const RepoCache cache(settings.hub_cache, repo_id);
  std::string problem;
  if (settings.offline) {
    if (auto dir = find_cached_snapshot(cache, repo_id, revision, problem)) return *dir;
    throw_error(problem,
                ", and offline mode is on (HF_HUB_OFFLINE=1 or the offline option): run once online");
  }
  HubClient hub(settings);
  RepoInfo info;
  try {
    info = hub.repo_info(repo_id, revision);
  } catch (const HubStatusError& e) {
    // A private or gated repo without a token, or a Hub failure: what the cache holds will do, as in Python.
    if (e.missing_revision_or_file) throw;
    if (auto dir = find_cached_snapshot(cache, repo_id, revision, problem)) return *dir;
    throw;
  } catch (const HttpTransportError& e) {
    if (auto dir = find_cached_snapshot(cache, repo_id, revision, problem)) return *dir;
    throw_error(problem, ", and the Hub cannot be reached: ", e.what());
  }
  cache.write_ref(revision, info.commit);
  for (const std::string& file : model_files(info.files, weights))
    fetch(hub, cache, repo_id, info.commit, file);
  const fs::path snapshot = cache.snapshot_dir(info.commit);
  if (weights && contains(info.files, kIndexFile)) {
    for (const std::string& shard : index_shards((snapshot / kIndexFile).string())) {
      check(contains(info.files, shard), kIndexFile, " of ", describe(repo_id, revision),
            " names the shard '", shard, "', which the repo does not have");
      fetch(hub, cache, repo_id, info.commit, shard);
    }
  }
  return snapshot.string();
}

}  // namespace

HubSettings hub_settings(const HubOptions& options) {
  HubSettings settings;
  const std::string hf_home = expand_path(
      env("HF_HOME").value_or(env("XDG_CACHE_HOME").value_or(home_dir("") + "/.cache") + "/huggingface"));
  settings.hub_cache = expand_path(options.cache_dir.value_or(
      env("HF_HUB_CACHE").value_or(env("HUGGINGFACE_HUB_CACHE").value_or(hf_home + "/hub"))));
  settings.endpoint = options.endpoint.value_or(env("HF_ENDPOINT").value_or("https://huggingface.co"));
  while (settings.endpoint.ends_with('/')) settings.endpoint.pop_back();
  if (options.token) {
    settings.token = clean_token(*options.token);
  } else if (!env_is_true("HF_HUB_DISABLE_IMPLICIT_TOKEN")) {
    settings.token = token_from_environment(hf_home);
  }
  settings.offline = options.offline || env_is_true("HF_HUB_OFFLINE") || env_is_true("TRANSFORMERS_OFFLINE");
  settings.progress = options.progress && !progress_bars_disabled();
  settings.etag_timeout_s = env_seconds("HF_HUB_ETAG_TIMEOUT");
  settings.download_timeout_s = env_seconds("HF_HUB_DOWNLOAD_TIMEOUT");
  return settings;
}

void validate_repo_id(const std::string& id) {
  const std::string problem = repo_id_problem(id);
  check(problem.empty(), "'", id, "' is not a Hub repo id: ", problem);
}

std::vector<std::string> model_files(const std::vector<std::string>& repo_files, bool weights) {
  std::vector<std::string> files;
  for (const char* name : kModelFiles) {
    if (contains(repo_files, name)) files.emplace_back(name);
  }
  if (!weights) return files;
  if (contains(repo_files, kIndexFile)) {
    files.emplace_back(kIndexFile);
  } else if (contains(repo_files, kSingleWeightsFile)) {
    files.emplace_back(kSingleWeightsFile);
  }
  return files;
}

std::vector<std::string> index_shards(const std::string& index_path) {
  const json::Value index = json::parse_file(index_path);
  std::vector<std::string> shards;
  try {
    for (const auto& [tensor, file] : index.at("weight_map").as_object()) shards.push_back(file.as_string());
  } catch (const Error& e) {
    throw_error(index_path, ": ", e.what());
  }
  std::sort(shards.begin(), shards.end());
  shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  return shards;
}

std::string resolve_model_dir(const std::string& id_or_path, const HubOptions& options) {
  std::error_code ec;
  if (fs::is_directory(id_or_path, ec)) return id_or_path;
  check(!fs::exists(id_or_path, ec), "'", id_or_path, "' is a file, not a model folder or a Hub repo id");
  const std::string problem = repo_id_problem(id_or_path);
  check(problem.empty(), "'", id_or_path, "' is neither a local folder nor a Hub repo id: ", problem);
  return download_snapshot(hub_settings(options), id_or_path, options.revision, options.weights);
}

}  // namespace tfm::io

#include "tfm/io/checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tfm/core/error.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// "model-00001-of-00003.safetensors", as huggingface_hub names shards.
std::string shard_name(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

bool is_shard_name(std::string_view name) {
  constexpr std::string_view kShape = "model-#####-of-#####.safetensors";
  if (name.size() != kShape.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const bool match =
        kShape[i] == '#' ? std::isdigit(static_cast<unsigned char>(name[i])) != 0 : name[i] == kShape[i];
    if (!match) return false;
  }
  return true;
}

// The regular files directly in `dir`; an unreadable folder is a tfm::Error naming it.
std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (it->is_regular_file(error)) files.push_back(it->path());
  }
  check(!error, "cannot list folder '", dir.string(), "': ", error.message());
  return files;
}

}  // namespace

Checkpoint Checkpoint::open(const std::string& dir) {
  std::error_code error;  // the filesystem queries below report through it rather than throw
  check(fs::is_directory(dir, error), "checkpoint folder '", dir, "' does not exist or is not a folder");
  Checkpoint checkpoint;
  checkpoint.dir_ = dir;
  const fs::path root(dir);

  // As Transformers: model.safetensors wins over an index; tfm then falls back to every .safetensors file.
  const bool single = fs::exists(root / kSingleFile, error);
  const fs::path index_path = root / kIndexFile;
  if (!single && fs::exists(index_path, error)) {
    const std::string index_name = index_path.string();
    const json::Value index = json::parse_file(index_name);
    const json::Value* weight_map = index.is_object() ? index.find("weight_map") : nullptr;
    check(weight_map && weight_map->is_object() && weight_map->size() > 0, "index '", index_name,
          "' has no \"weight_map\" object naming the tensors");
    std::map<std::string, size_t> shards;  // shard file name -> position in files_
    for (const auto& [name, value] : weight_map->as_object()) {
      check(value.is_string(), "index '", index_name, "': tensor '", name, "' maps to ",
            json::dump_compact(value), ", not a file name");
      const std::string& shard = value.as_string();
      const fs::path relative(shard);
      check(!relative.is_absolute() && std::none_of(relative.begin(), relative.end(),
                                                    [](const fs::path& part) { return part == ".."; }),
            "index '", index_name, "': tensor '", name, "' maps to '", shard,
            "', which is outside the folder");
      auto it = shards.find(shard);
      if (it == shards.end()) {
        const fs::path shard_path = root / relative;
        check(fs::is_regular_file(shard_path, error), "index '", index_name, "': tensor '", name,
              "' maps to shard '", shard_path.string(), "', which does not exist");
        it = shards.emplace(shard, checkpoint.files_.size()).first;
        checkpoint.files_.push_back(SafetensorsFile::open(shard_path.string()));
      }
      const SafetensorsFile& file = checkpoint.files_[it->second];
      const TensorInfo* info = file.find(name);
      check(info != nullptr, "index '", index_name, "' maps tensor '", name, "' to shard '", file.path(),
            "', which has no such tensor");
      checkpoint.locations_[name] = {it->second, static_cast<size_t>(info - file.tensors().data())};
      checkpoint.names_.push_back(name);
    }
    return checkpoint;
  }

  std::vector<std::string> paths;
  if (single) {
    paths.push_back((root / kSingleFile).string());
  } else {
    for (const fs::path& file : files_in(root)) {
      if (file.extension() == ".safetensors") paths.push_back(file.string());
    }
    std::sort(paths.begin(), paths.end());
  }
  check(!paths.empty(), "checkpoint folder '", dir, "' has no ", kIndexFile, ", no ", kSingleFile,
        " and no other .safetensors file");
  for (const std::string& path : paths) {
    const size_t f = checkpoint.files_.size();
    checkpoint.files_.push_back(SafetensorsFile::open(path));
    const std::vector<TensorInfo>& tensors = checkpoint.files_.back().tensors();
    for (size_t t = 0; t < tensors.size(); ++t) {
      const auto [it, added] = checkpoint.locations_.emplace(tensors[t].name, Location{f, t});
      check(added, "tensor '", tensors[t].name, "' is in both '", checkpoint.files_[it->second.file].path(),
            "' and '", path, "'");
      checkpoint.names_.push_back(tensors[t].name);
    }
  }
  return checkpoint;
}

std::vector<std::string> Checkpoint::names() const {
  return names_;
}

const Checkpoint::Location& Checkpoint::locate(std::string_view name) const {
  const auto it = locations_.find(name);
  if (it == locations_.end()) throw_error("checkpoint '", dir_, "' has no tensor '", name, "'");
  return it->second;
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  const auto it = locations_.find(name);
  return it == locations_.end() ? nullptr : &files_[it->second.file].tensors()[it->second.tensor];
}

Tensor Checkpoint::get(std::string_view name) const {
  const Location& at = locate(name);
  return files_[at.file].get(name);
}

void Checkpoint::read(std::string_view name, size_t begin, void* dst, size_t bytes) const {
  const Location& at = locate(name);
  files_[at.file].read(name, begin, dst, bytes);
}

void Checkpoint::release(std::string_view name, size_t begin, size_t end) const {
  const Location& at = locate(name);
  files_[at.file].release(name, begin, end);
}

const std::string& Checkpoint::file_of(std::string_view name) const {
  return files_[locate(name).file].path();
}

void save_sharded(const std::string& dir, const std::vector<std::pair<std::string, Tensor>>& tensors,
                  size_t max_shard_bytes, const json::Object& metadata) {
  // huggingface_hub's split: in order; a tensor over the limit alone; otherwise start a new shard when the
  // tensor would not fit in the current one.
  std::vector<std::vector<std::pair<std::string, Tensor>>> shards;
  std::vector<std::pair<std::string, Tensor>> current;
  size_t current_bytes = 0, total_bytes = 0;
  int64_t total_parameters = 0;
  for (const auto& named : tensors) {
    const size_t bytes = named.second.defined() ? named.second.nbytes() : 0;
    total_bytes += bytes;
    total_parameters += named.second.defined() ? named.second.numel() : 0;
    if (bytes > max_shard_bytes) {
      shards.push_back({named});
      continue;
    }
    if (current_bytes + bytes > max_shard_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(named);
    current_bytes += bytes;
  }
  if (!current.empty() || shards.empty()) shards.push_back(std::move(current));

  const fs::path root(dir);
  std::error_code error;
  fs::create_directories(root, error);
  check(!error, "cannot create checkpoint folder '", dir, "': ", error.message());

  std::vector<std::string> names;  // the files this save writes
  for (size_t i = 0; i < shards.size(); ++i) {
    names.push_back(shards.size() == 1 ? kSingleFile : shard_name(i, shards.size()));
  }
  if (shards.size() > 1) names.push_back(kIndexFile);
  // Drop what an earlier save left and this one will not rewrite, first: a model.safetensors of an earlier
  // save would shadow a newer index, as Checkpoint::open and Transformers prefer it.
  for (const fs::path& file : files_in(root)) {
    const std::string name = file.filename().string();
    const bool weights = name == kSingleFile || name == kIndexFile || is_shard_name(name);
    if (weights && std::find(names.begin(), names.end(), name) == names.end()) {
      check(fs::remove(file, error), "cannot remove '", file.string(),
            "' of an earlier save: ", error.message());
    }
  }

  json::Object weight_map;
  for (size_t i = 0; i < shards.size(); ++i) {
    save_safetensors((root / names[i]).string(), shards[i], metadata);
    for (const auto& named : shards[i]) weight_map.emplace_back(named.first, names[i]);
  }
  if (shards.size() == 1) return;
  const json::Value index = json::Object{{"metadata", json::Object{{"total_parameters", total_parameters},
                                                                   {"total_size", json::Value(total_bytes)}}},
                                         {"weight_map", std::move(weight_map)}};
  json::DumpOptions options;
  options.indent = 2;
  options.sort_keys = true;
  options.item_separator = ",";
  const std::string index_path = (root / kIndexFile).string();
  std::ofstream out(index_path, std::ios::binary | std::ios::trunc);
  out << json::dump(index, options) << '\n';
  out.close();
  check(out.good(), "cannot write '", index_path, "'");
}

}  // namespace tfm

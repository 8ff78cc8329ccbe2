// Which files make up a checkpoint directory and where each tensor lives.
#include "fusebench/checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "fusebench/input_files.hpp"

namespace fusebench {
namespace fs = std::filesystem;
namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

std::string read_text(const fs::path& path) {
  // A fifo would block the read, a directory reads as empty: say what it is instead.
  if (const auto what = not_a_regular_file(path.string()); !what.empty())
    throw CheckpointError(path.string() + " " + what + "; expected a regular file (JSON)");
  try {
    return read_input_file(path.string(), "the checkpoint file");
  } catch (const InputFileError& e) {
    throw CheckpointError(e.what());
  }
}

// A weight_map value must name a file inside the directory: relative, no "..". Symbolic links
// are followed (the Hugging Face cache links snapshot files to ../../blobs/).
void check_file_name(const std::string& index, const std::string& tensor, const std::string& file) {
  const fs::path p(file);
  bool escapes = file.empty() || p.is_absolute() || p.has_root_name();
  for (const auto& part : p) escapes = escapes || part == "..";
  if (escapes) {
    throw CheckpointError(index + ": tensor " + quote_name(tensor) + " maps to file " +
                          quote_name(file) + ", which is not a file name inside the directory");
  }
}

// A shard must be a regular *.safetensors file: a fifo would block the read, and a directory or
// device is not a file of tensors. Throws naming what was found.
void require_regular_file(const fs::path& path, const std::string& context) {
  if (const auto what = not_a_regular_file(path.string()); !what.empty()) {
    throw CheckpointError(context + path.string() + " " + what +
                          "; expected a regular file (a *.safetensors shard)");
  }
}

std::uint64_t fnv1a(std::uint64_t h, std::string_view bytes) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw CheckpointError(dir +
                          ": not a directory (--weights takes a Hugging Face model directory)");
  }
  const fs::path root(dir);
  if (fs::exists(fs::symlink_status(root / kIndexName, ec))) {
    index_path_ = (root / kIndexName).string();
    index_text_ = read_text(index_path_);
    nlohmann::json index;
    try {
      index = parse_input_json(index_text_, index_path_);
    } catch (const InputFileError& e) {
      throw CheckpointError(e.what());
    } catch (const nlohmann::json::exception& e) {
      throw CheckpointError(index_path_ + ": not valid JSON: " + printable(e.what()));
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      throw CheckpointError(index_path_ + ": has no \"weight_map\" object {tensor: file}");
    }
    std::map<std::string, std::size_t> file_ids;
    for (const auto& [tensor, file] : index["weight_map"].items()) {
      if (!file.is_string()) {
        throw CheckpointError(index_path_ + ": tensor " + quote_name(tensor) + " maps to " +
                              file.dump() + ", not a file name");
      }
      const std::string name = file.get<std::string>();
      check_file_name(index_path_, tensor, name);
      if (name == kIndexName) {
        throw CheckpointError(index_path_ + ": tensor " + quote_name(tensor) +
                              " maps to the index itself: the index is JSON, the files it "
                              "names are *.safetensors shards");
      }
      auto [it, added] = file_ids.emplace(name, file_ids.size());
      (void)added;
      where_[tensor] = it->second;
    }
    if (file_ids.empty()) throw CheckpointError(index_path_ + ": the weight_map is empty");
    files_.resize(file_ids.size());
    for (const auto& [name, id] : file_ids) {
      const fs::path path = root / name;
      require_regular_file(path, index_path_ + ": refers to " + quote_name(name) + ", but ");
      files_[id] = std::make_unique<SafetensorsFile>(path.string());
    }
    for (const auto& [tensor, id] : where_) {
      if (!files_[id]->find(tensor)) {
        throw CheckpointError(index_path_ + " maps tensor " + quote_name(tensor) + " to " +
                              files_[id]->path() + ", which has no such tensor");
      }
    }
    return;
  }
  std::vector<fs::path> paths;
  if (fs::exists(fs::symlink_status(root / kSingleName, ec))) {
    require_regular_file(root / kSingleName, "");
    paths.push_back(root / kSingleName);
  } else {
    // Every *.safetensors is a shard: one that is not a regular file is refused, not skipped.
    for (const auto& entry : fs::directory_iterator(root, ec)) {
      if (entry.path().extension() != ".safetensors") continue;
      require_regular_file(entry.path(), "");
      paths.push_back(entry.path());
    }
    std::sort(paths.begin(), paths.end());
  }
  if (paths.empty()) {
    throw CheckpointError(dir + ": no " + kIndexName + ", " + kSingleName +
                          " or *.safetensors file (a .bin or .pt checkpoint must be converted to "
                          "safetensors first)");
  }
  for (const auto& path : paths) {
    files_.push_back(std::make_unique<SafetensorsFile>(path.string()));
    for (const auto& [tensor, info] : files_.back()->header().tensors) {
      const auto [it, added] = where_.emplace(tensor, files_.size() - 1);
      if (!added) {
        throw CheckpointError(dir + ": tensor " + quote_name(tensor) + " is in both " +
                              files_[it->second]->path() + " and " + path.string() + " (and no " +
                              kIndexName + " says which one to use)");
      }
    }
  }
}

bool Checkpoint::has(std::string_view name) const { return where_.find(name) != where_.end(); }

Checkpoint::Tensor Checkpoint::tensor(std::string_view name) const {
  const auto it = where_.find(name);
  if (it == where_.end()) {
    throw CheckpointError(lookup_description() + ": no tensor " + quote_name(name));
  }
  const SafetensorsFile& file = *files_[it->second];
  return {file, file.tensor(name)};
}

std::string Checkpoint::lookup_description() const {
  if (!index_path_.empty()) return index_path_;
  if (files_.size() == 1) return files_.front()->path();
  std::string names;
  for (const auto& f : files_) {
    names += (names.empty() ? "" : ", ") + fs::path(f->path()).filename().string();
  }
  return dir_ + " (" + std::to_string(files_.size()) + " files: " + names + ")";
}

std::string Checkpoint::fingerprint() const {
  std::uint64_t h = 1469598103934665603ull;
  h = fnv1a(h, index_text_);
  for (const auto& f : files_) {
    h = fnv1a(h, fs::path(f->path()).filename().string());
    h = fnv1a(h, std::string_view("\0", 1));
    const auto header = f->header_json();
    h = fnv1a(h, {reinterpret_cast<const char*>(header.data()), header.size()});
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("fnv1a64:") + hex;
}

}  // namespace fusebench

// The run's inputs and outputs, one list each (include/fusebench/input_files.hpp, issue 37).
#include "fusebench/input_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <system_error>
#include <vector>

namespace fusebench {
namespace {

namespace fs = std::filesystem;

// Who a path is: device and inode where it exists (links and hard links compare equal), and its
// resolved absolute path (for a file not created yet).
struct FileId {
  bool exists = false;
  bool character = false;  // a character device: /dev/null may take several outputs
  dev_t dev = 0;
  ino_t ino = 0;
  fs::path resolved;
};

FileId identify(const std::string& path) {
  FileId id;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.character = S_ISCHR(st.st_mode);
    id.dev = st.st_dev;
    id.ino = st.st_ino;
  }
  std::error_code ec;
  id.resolved = fs::weakly_canonical(path, ec);
  if (ec) id.resolved = fs::absolute(path, ec).lexically_normal();
  return id;
}

bool same_file(const FileId& a, const FileId& b) {
  if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
  return a.resolved == b.resolved;
}

struct Input {
  std::string what, path;
  FileId id;
  bool named = false;  // described by the flag that names it, not only by the reader
};
struct Output {
  std::string flag, given;
  int fd = -1;
  FileId id;
};

struct Registry {
  std::mutex mutex;
  std::vector<Input> inputs;
  std::vector<Output> outputs;
};

Registry& registry() {
  static Registry r;
  return r;
}

// A file registered twice is kept once, described by the flag that names it when one does
// ("read by --weights" rather than the reader's "a checkpoint file").
void add_input_locked(Registry& r, const std::string& what, const std::string& path, bool named) {
  FileId id = identify(path);
  for (auto& in : r.inputs) {
    if (!same_file(in.id, id)) continue;
    if (named && !in.named) {
      in.what = what;
      in.named = true;
    }
    return;
  }
  r.inputs.push_back({what, path, std::move(id), named});
}

void add_input(const std::string& what, const std::string& path, bool named) {
  if (path.empty() || path == "-") return;
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    // A checkpoint: the files in it that a run reads.
    for (const auto& e : fs::directory_iterator(path, ec)) {
      const std::string name = e.path().filename().string();
      const bool read = name.ends_with(".json") || name.ends_with(".safetensors");
      if (read && e.is_regular_file(ec)) add_input_locked(r, what, e.path().string(), named);
    }
    return;
  }
  add_input_locked(r, what, path, named);
}

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a fifo";
  if (S_ISCHR(mode)) return "is a character device";
  if (S_ISBLK(mode)) return "is a block device";
  if (S_ISSOCK(mode)) return "is a socket";
  return "is not a regular file";
}

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

void register_input(const std::string& what, const std::string& path, InputNamedBy by) {
  add_input(what, path, by == InputNamedBy::flag);
}

std::string read_input_file(const std::string& path, const std::string& what,
                            std::size_t max_bytes) {
  const std::string name = what + " " + path;
  const std::string rule =
      " (an input is a regular file of at most " + mib(max_bytes) + ", docs/usage.md)";
  add_input(what, path, false);
  // O_NONBLOCK: a fifo is refused below, never waited on for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw InputFileError(name + ": cannot be opened: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw InputFileError(name + ": cannot examine: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw InputFileError(name + ": " + kind_of(st.st_mode) + rule);
  if (static_cast<std::uintmax_t>(st.st_size) > max_bytes)
    throw InputFileError(name + ": " + std::to_string(st.st_size) + " bytes, over the limit" +
                         rule);
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  for (;;) {
    if (done == text.size()) {
      if (text.size() > max_bytes) break;
      text.resize(std::min(max_bytes + 1, text.size() + 65536));  // it grew since fstat
    }
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputFileError(name + ": cannot read: " + std::strerror(errno));
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  if (done > max_bytes) throw InputFileError(name + ": over the limit" + rule);
  text.resize(done);
  return text;
}

nlohmann::json parse_input_json(std::string_view text, const std::string& name,
                                JsonInputRules rules) {
  struct Level {
    bool object = false;
    std::string path;  // "a.b[2]": where this container is
    std::set<std::string> keys;
    std::string last_key;
    std::size_t index = 0;
  };
  std::vector<Level> open;
  const auto child_path = [](const Level& parent) {
    if (!parent.object) return parent.path + "[" + std::to_string(parent.index) + "]";
    return parent.path.empty() ? parent.last_key : parent.path + "." + parent.last_key;
  };
  const auto next_element = [&] {
    if (!open.empty() && !open.back().object) ++open.back().index;
  };
  using Event = nlohmann::json::parse_event_t;
  // nlohmann's parser is iterative, but what walks the document afterwards (copies, dump,
  // comparisons) recurses per level: a deep document is refused while it is being read.
  const auto callback = [&](int depth, Event event, nlohmann::json& parsed) {
    switch (event) {
      case Event::object_start:
      case Event::array_start: {
        if (depth >= rules.max_depth)
          throw InputFileError(name + ": JSON nested deeper than " +
                               std::to_string(rules.max_depth) +
                               " levels (the limit for any input, docs/usage.md)");
        Level level;
        level.object = event == Event::object_start;
        if (!open.empty()) level.path = child_path(open.back());
        open.push_back(std::move(level));
        break;
      }
      case Event::key: {
        if (!rules.unique_keys || open.empty()) break;
        Level& level = open.back();
        std::string key = parsed.get<std::string>();
        if (!level.keys.insert(key).second) {
          const std::string shown_key = rules.quote ? rules.quote(key) : "\"" + key + "\"";
          const std::string shown_path = rules.quote ? rules.quote(level.path) : level.path;
          throw InputFileError(name + ": key " + shown_key + " appears twice" +
                               (level.path.empty() ? "" : " in " + shown_path) +
                               " (JSON would keep the last one silently; keep the one you mean)");
        }
        level.last_key = std::move(key);
        break;
      }
      case Event::object_end:
      case Event::array_end:
        if (!open.empty()) open.pop_back();
        next_element();
        break;
      case Event::value:
        next_element();
        break;
    }
    return true;
  };
  return nlohmann::json::parse(text.begin(), text.end(), callback);
}

OutputTarget check_output(const std::string& path, const std::string& flag) {
  OutputTarget t = resolve_output(path, flag);
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  const std::string given = flag + "=" + path;
  const auto clash = [&](const Output& o) {
    return std::invalid_argument(given + " is the file " + o.flag + "=" + o.given +
                                 " writes: one would replace the other; give each output a path "
                                 "of its own");
  };
  if (t.fd >= 0) {
    for (const auto& o : r.outputs) {
      if (o.fd == t.fd) throw clash(o);
    }
    r.outputs.push_back({flag, path, t.fd, {}});
    return t;
  }
  FileId id = identify(t.path);
  for (const auto& in : r.inputs) {
    if (same_file(in.id, id))
      throw std::invalid_argument(given + " is " + in.what + " (" + in.path +
                                  "): an output never replaces an input; write it elsewhere");
  }
  if (!id.character) {
    for (const auto& o : r.outputs) {
      if (o.fd < 0 && same_file(o.id, id)) throw clash(o);
    }
  }
  r.outputs.push_back({flag, path, -1, std::move(id)});
  return t;
}

void refuse_output_over_input(const std::string& output, const std::string& flag,
                              const std::vector<std::pair<std::string, std::string>>& inputs) {
  if (output.empty() || output == "-") return;
  const FileId out = identify(output);
  for (const auto& [what, path] : inputs) {
    if (path.empty() || path == "-") continue;
    std::vector<std::string> files{path};
    std::error_code ec;
    if (fs::is_directory(path, ec)) {  // a checkpoint: the files in it that a run reads
      files.clear();
      for (const auto& e : fs::directory_iterator(path, ec)) {
        const std::string name = e.path().filename().string();
        const bool read = name.ends_with(".json") || name.ends_with(".safetensors");
        if (read && e.is_regular_file(ec)) files.push_back(e.path().string());
      }
    }
    for (const auto& file : files) {
      if (same_file(identify(file), out))
        throw std::invalid_argument(flag + "=" + output + " is " + what + " (" + file +
                                    "): an output never replaces an input; write it elsewhere");
    }
  }
}

void reset_file_registry() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.inputs.clear();
  r.outputs.clear();
}

}  // namespace fusebench

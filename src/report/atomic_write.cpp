#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "fusebench/output_path.hpp"
#include "fusebench/report.hpp"

namespace fusebench {

void write_file_atomically(const std::string& path, const std::string& content) {
  write_output(resolve_output(path, "output"), content);
}

std::vector<std::string> prepare_report_path(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  const std::string given = flag + "=" + path;
  const std::string valid = "give a file path, e.g. " + flag + "=reports/run.json";
  // Directories, block devices, sockets and closed descriptors are refused here; a stream (a
  // descriptor, fifo or character device) needs no directory.
  const OutputTarget target = resolve_output(path, flag);
  if (!target.atomic) return {};
  std::error_code ec;
  const fs::path written(target.path);  // a symlink's target
  const fs::path parent = written.has_parent_path() ? written.parent_path() : ".";
  // The missing ancestors, outermost first; the first existing one must be a directory.
  std::vector<fs::path> missing;
  fs::path existing = parent;
  while (!existing.empty() && !fs::exists(existing, ec)) {
    missing.insert(missing.begin(), existing);
    existing = existing.has_parent_path() && existing.parent_path() != existing
                   ? existing.parent_path()
                   : fs::path();
  }
  if (!existing.empty() && !fs::is_directory(existing, ec))
    throw std::invalid_argument(
        given + ": " + existing.string() +
        " is not a directory, so no report can be written under it: " + valid);
  std::vector<std::string> created;
  for (const auto& dir : missing) {
    if (!fs::create_directory(dir, ec) && ec)
      throw std::invalid_argument(given + ": cannot create the directory " + dir.string() + ": " +
                                  ec.message());
    created.push_back(dir.string());
  }
  if (::access(parent.c_str(), W_OK) != 0)
    throw std::invalid_argument(given + ": cannot write in " + parent.string() + ": " +
                                std::strerror(errno) + ": " + valid + " in a writable directory");
  return created;
}

}  // namespace fusebench

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "fusebench/report.hpp"

namespace fusebench {

void write_file_atomically(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::runtime_error("cannot write " + tmp + ": " + err);
    }
    done += static_cast<std::size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + err);
  }
}

std::vector<std::string> prepare_report_path(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  const std::string given = flag + "=" + path;
  const std::string valid = "give a file path, e.g. " + flag + "=reports/run.json";
  if (path.empty()) throw std::invalid_argument(given + " is empty: " + valid);
  std::error_code ec;
  if (path.back() == '/' || fs::is_directory(path, ec))
    throw std::invalid_argument(given + " is a directory: " + valid + " (" + flag + "=" +
                                (fs::path(path) / "report.json").string() + ")");
  const fs::path parent = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : ".";
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

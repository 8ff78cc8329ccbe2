#include "fusebench/output_path.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <system_error>

namespace fusebench {
namespace {

namespace fs = std::filesystem;

// Linux's own limit on symlinks followed in one lookup.
constexpr int kMaxSymlinkHops = 40;

// The descriptor a path names without a file behind it: "-", /dev/stdout, /dev/stderr,
// /dev/fd/N, /proc/self/fd/N. Opening those by name would reopen (and, with O_TRUNC, truncate)
// whatever the shell connected, or fail for a pipe; writing to the descriptor is what is meant.
std::optional<int> named_descriptor(const std::string& path) {
  if (path == "-" || path == "/dev/stdout") return STDOUT_FILENO;
  if (path == "/dev/stderr") return STDERR_FILENO;
  for (const std::string prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (path.rfind(prefix, 0) != 0) continue;
    const std::string digits = path.substr(prefix.size());
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    return std::stoi(digits);
  }
  return std::nullopt;
}

std::string descriptor_name(int fd) {
  if (fd == STDOUT_FILENO) return "standard output";
  if (fd == STDERR_FILENO) return "standard error";
  return "descriptor " + std::to_string(fd);
}

void write_all(int fd, const std::string& content, const std::string& what) {
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("cannot write " + what + ": " + std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
}

// Opens `path` with `flags` without blocking (a fifo without a reader fails with ENXIO rather
// than wait, signals masked, for one that may never come), then writes `content` blocking, every
// return value checked (a full disk, /dev/full, is an error naming the path).
void write_stream(const std::string& path, int flags, const std::string& content) {
  const int fd = ::open(path.c_str(), flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw std::runtime_error(
        "cannot open " + path + ": " + std::strerror(err) +
        (err == ENXIO ? " (a fifo with no reader: start its reader first)" : ""));
  }
  try {
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
      throw std::runtime_error("cannot set up " + path + ": " + std::strerror(errno));
    write_all(fd, content, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0)
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

void write_atomically(const OutputTarget& t, const std::string& content) {
  const fs::path target(t.path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  // Kept when it existed: a report replaced in place keeps who may read it.
  mode_t mode = 0644;
  struct stat st {};
  if (::stat(t.path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) mode = st.st_mode & 07777;
  static std::atomic<unsigned> counter{0};
  const std::string tmp =
      t.path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  try {
    write_all(fd, content, tmp);
    if (::fchmod(fd, mode) != 0 || ::fsync(fd) != 0)
      throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write " + tmp + ": " + err);
  }
  // The target is checked again: a fifo or device put there since resolve_output is not replaced.
  if (::lstat(t.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(t.path + " is no longer a regular file: not replaced");
  }
  if (::rename(tmp.c_str(), t.path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + t.path + ": " + err);
  }
}

}  // namespace

OutputTarget resolve_output(const std::string& path, const std::string& flag) {
  const std::string given = flag + "=" + path;
  const std::string valid =
      "give a file path (e.g. " + flag + "=reports/run.json), or - for standard output";
  if (path.empty()) throw std::invalid_argument(given + " is empty: " + valid);
  OutputTarget t;
  t.given = path;
  std::string p = path;
  for (int hop = 0;; ++hop) {
    if (hop > kMaxSymlinkHops)
      throw std::invalid_argument(given + ": more than " + std::to_string(kMaxSymlinkHops) +
                                  " symlinks to follow (a loop?): " + valid);
    if (const auto fd = named_descriptor(p)) {
      if (::fcntl(*fd, F_GETFD) == -1)
        throw std::invalid_argument(given + ": " + descriptor_name(*fd) +
                                    " is not open in this process: " + valid);
      t.path = p;
      t.fd = *fd;
      t.atomic = false;
      t.exists = true;
      t.note = flag + "=" + path + " goes to " + descriptor_name(*fd) +
               ": written once, at the end of the run, and not atomically";
      return t;
    }
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) break;  // new: created at the end of the links
    if (!S_ISLNK(st.st_mode)) break;
    std::error_code ec;
    const fs::path link = fs::read_symlink(p, ec);
    if (ec)
      throw std::invalid_argument(given + ": cannot read the symlink " + p + ": " + ec.message());
    p = link.is_absolute() ? link.string() : (fs::path(p).parent_path() / link).string();
  }
  t.path = p;
  if (p != path)
    t.note = flag + "=" + path + " is a symlink: its target " + p + " is written (atomically)";
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    if (path.back() == '/')
      throw std::invalid_argument(given + " is a directory: " + valid + " (" + flag + "=" +
                                  (fs::path(path) / "report.json").string() + ")");
    // A device that is absent (a mistyped /dev/sdX) must not become a regular file there.
    const std::string where = fs::absolute(p).lexically_normal().string();
    for (const std::string system : {"/dev/", "/proc/", "/sys/"}) {
      if (where.rfind(system, 0) == 0)
        throw std::invalid_argument(given + ": " + where +
                                    " does not exist, and no file is created under " + system +
                                    " (it holds devices and kernel files): " + valid);
    }
    return t;
  }
  t.exists = true;
  if (S_ISREG(st.st_mode)) return t;
  if (S_ISDIR(st.st_mode))
    throw std::invalid_argument(given + " is a directory: " + valid + " (" + flag + "=" +
                                (fs::path(path) / "report.json").string() + ")");
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    t.atomic = false;
    t.note = flag + "=" + path + " is a " +
             (S_ISFIFO(st.st_mode) ? "fifo (the write waits for a reader)" : "character device") +
             ": written once, at the end of the run, and not atomically";
    return t;
  }
  const std::string kind = S_ISBLK(st.st_mode) ? "a block device (a report would overwrite the "
                                                 "device's contents)"
                                               : "a socket";
  throw std::invalid_argument(given + " is " + kind + ": " + valid);
}

void write_output(const OutputTarget& t, const std::string& content) {
  if (t.fd >= 0) {
    write_all(t.fd, content, descriptor_name(t.fd));
    return;
  }
  if (t.atomic) {
    write_atomically(t, content);
    return;
  }
  // A fifo or character device: opened as it is, never created or truncated.
  write_stream(t.path, O_WRONLY, content);
}

void append_output(const OutputTarget& t, const std::string& content) {
  if (t.fd >= 0) {
    write_all(t.fd, content, descriptor_name(t.fd));
    return;
  }
  write_stream(t.path, O_WRONLY | O_APPEND | O_CREAT, content);
}

}  // namespace fusebench

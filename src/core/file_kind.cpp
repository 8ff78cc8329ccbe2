#include "fusebench/file_kind.hpp"

#include <filesystem>

namespace fusebench {
namespace fs = std::filesystem;

std::string not_a_regular_file(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // follows links (the HF cache links blobs)
  switch (st.type()) {
    case fs::file_type::regular:
      return "";
    case fs::file_type::not_found:
      return fs::is_symlink(fs::symlink_status(path, ec)) ? "is a symbolic link to nothing"
                                                          : "does not exist";
    case fs::file_type::directory:
      return "is a directory";
    case fs::file_type::fifo:
      return "is a fifo";
    case fs::file_type::socket:
      return "is a socket";
    case fs::file_type::character:
      return "is a character device";
    case fs::file_type::block:
      return "is a block device";
    default:
      return ec ? "cannot be examined (" + ec.message() + ")" : "is not a regular file";
  }
}

}  // namespace fusebench

// The one rule for output paths of the gate and the advisor (include/fusebench/output_paths.hpp).
#include "fusebench/output_paths.hpp"

#include <sys/stat.h>

#include <filesystem>

#include "fusebench/advise.hpp"

namespace fusebench::advise {

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  // One does not exist yet: it can still be the other's spelling (the other then does not exist
  // either, or is a dangling link, which a write would create).
  std::error_code ea, eb;
  const auto ca = std::filesystem::weakly_canonical(a, ea);
  const auto cb = std::filesystem::weakly_canonical(b, eb);
  return !ea && !eb && ca == cb;
}

void refuse_output_as_input(const std::vector<std::pair<std::string, std::string>>& outputs,
                            const std::vector<std::string>& inputs) {
  for (const auto& [flag, out] : outputs) {
    if (out.empty()) continue;
    for (const auto& in : inputs) {
      if (!same_file(out, in)) continue;
      throw InputError(flag + ": " + out + " is the input " + in +
                       " (the same file): writing it would destroy the input; nothing was "
                       "written. Write the output to another path");
    }
  }
}

}  // namespace fusebench::advise

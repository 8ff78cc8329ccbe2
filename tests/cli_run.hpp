#pragma once
// Runs the fusebench binary as a user would, for the end-to-end tests (FUSEBENCH_BIN_DIR is set
// by tests/CMakeLists.txt).
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace fusebench::testing {

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// A shell command as given (its own redirections); `output` is what it writes to stdout.
inline CliResult run_command(const std::string& cmd) {
  CliResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe)) r.output += buf.data();
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline CliResult run_fusebench(const std::string& args) {
  return run_command(std::string(FUSEBENCH_BIN_DIR) + "/fusebench " + args + " 2>&1");
}

// A per-process temporary path, so parallel ctest runs do not collide.
inline std::filesystem::path temp_path(const std::string& prefix, const std::string& name) {
  return std::filesystem::temp_directory_path() /
         (prefix + "_" + std::to_string(::getpid()) + "_" + name);
}

// Strict parse: throws on NaN or a truncated file.
inline nlohmann::json load_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

}  // namespace fusebench::testing

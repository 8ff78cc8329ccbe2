#include <cstdio>
#include <fstream>
#include <string>

#include "fusebench/identity.hpp"
#include "fusebench/report.hpp"
#include "measure/cache_size.hpp"

#ifdef FUSEBENCH_HAVE_CUDA
#include <cublasLt.h>
#endif
#ifdef FUSEBENCH_HAVE_NCCL
#include <nccl.h>
#endif
#ifdef FUSEBENCH_HAVE_CUPTI
#include <cupti.h>
#endif

namespace fusebench {
namespace {

std::string run_command(const std::string& command) {
  std::string out;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof(buf), pipe)) out += buf;
    ::pclose(pipe);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace

std::string git_revision() {
#ifdef FUSEBENCH_SOURCE_DIR
  const std::string dir = FUSEBENCH_SOURCE_DIR;
  std::string rev = run_command("git -C '" + dir + "' rev-parse HEAD 2>/dev/null");
  if (rev.empty()) return "unknown (not a git checkout)";
  if (!run_command("git -C '" + dir + "' status --porcelain --untracked-files=no 2>/dev/null")
           .empty()) {
    rev += "-dirty";
  }
  return rev;
#else
  return "unknown";
#endif
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

nlohmann::json library_versions() {
  nlohmann::json v;
#ifdef FUSEBENCH_HAVE_CUDA
  v["cublaslt"] = std::to_string(cublasLtGetVersion());
#else
  v["cublaslt"] = "unavailable: built without CUDA";
#endif
#ifdef FUSEBENCH_HAVE_NCCL
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) {
    v["nccl"] = std::to_string(nccl / 10000) + "." + std::to_string(nccl / 100 % 100) + "." +
                std::to_string(nccl % 100);
  } else {
    v["nccl"] = "unavailable: ncclGetVersion failed";
  }
#else
  v["nccl"] = "unavailable: built without NCCL";
#endif
#ifdef FUSEBENCH_HAVE_CUPTI
  uint32_t cupti = 0;
  if (cuptiGetVersion(&cupti) == CUPTI_SUCCESS) {
    v["cupti_api"] = std::to_string(cupti);
  } else {
    v["cupti_api"] = "unavailable: cuptiGetVersion failed";
  }
#else
  v["cupti_api"] = "unavailable: built without CUPTI";
#endif
  v["google_benchmark"] = FUSEBENCH_GBENCH_VERSION;
  return v;
}

std::string shell_quote(const std::string& arg) {
  const bool plain = !arg.empty() && arg.find_first_not_of(
                                         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                         "0123456789_@%+=:,./-") == std::string::npos;
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

nlohmann::json collect_context(const nlohmann::json& backend_context,
                               const std::vector<std::string>& args) {
  std::string command_line;
  for (const auto& arg : args) {
    if (!command_line.empty()) command_line.push_back(' ');
    command_line += shell_quote(arg);
  }
  nlohmann::json ctx = {{"fusebench_version", FUSEBENCH_VERSION},
                        {"entry_naming_version", advise::kEntryNamingVersion},
                        {"git_revision", git_revision()},
                        {"command_line", command_line},
                        {"cpu_model", cpu_model_name()},
                        {"host_cache", measure::to_json(measure::host_last_level_cache())},
#ifdef NDEBUG
                        {"fusebench_build_type", "release"},
#else
                        {"fusebench_build_type", "debug"},
#endif
                        {"libraries", library_versions()}};
  for (const auto& [key, value] : backend_context.items()) ctx[key] = value;
  return ctx;
}

}  // namespace fusebench

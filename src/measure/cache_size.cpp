#include "measure/cache_size.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fusebench::measure {
namespace {

std::string read_word(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string word;
  in >> word;
  return word;
}

// "32768K" -> 33554432; "" or junk -> 0.
std::size_t parse_size(const std::string& text) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  const std::string unit = text.substr(used);
  if (unit == "K") return static_cast<std::size_t>(v) << 10;
  if (unit == "M") return static_cast<std::size_t>(v) << 20;
  if (unit == "G") return static_cast<std::size_t>(v) << 30;
  return unit.empty() ? static_cast<std::size_t>(v) : 0;
}

}  // namespace

HostCache host_last_level_cache(const std::string& sys_cache_dir) {
  HostCache best;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sys_cache_dir, ec)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    const std::string type = read_word(entry.path() / "type");
    if (type != "Data" && type != "Unified") continue;
    const std::size_t bytes = parse_size(read_word(entry.path() / "size"));
    int level = 0;
    try {
      level = std::stoi(read_word(entry.path() / "level"));
    } catch (const std::exception&) {
      continue;
    }
    if (bytes > 0 && (level > best.level || (level == best.level && bytes > best.bytes))) {
      best = {bytes, level,
              sys_cache_dir +
                  "/index*: the kernel's cache topology (as "
                  "context.caches)"};
    }
  }
  if (best.bytes > 0) return best;
  for (const auto& [level, name] :
       {std::pair{3, _SC_LEVEL3_CACHE_SIZE}, std::pair{2, _SC_LEVEL2_CACHE_SIZE}}) {
    const long v = sysconf(name);
    if (v > 0) {
      return {static_cast<std::size_t>(v), level,
              "sysconf (CPUID; " + sys_cache_dir +
                  " unreadable): may be the physical host's cache under virtualisation"};
    }
  }
  return {0, 0, "unknown: neither " + sys_cache_dir + " nor sysconf gives a cache size"};
}

nlohmann::json to_json(const HostCache& cache) {
  return {{"last_level_bytes", cache.bytes}, {"level", cache.level}, {"source", cache.source}};
}

}  // namespace fusebench::measure

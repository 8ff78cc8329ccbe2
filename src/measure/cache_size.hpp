#pragma once
// The host's last-level cache, from one source for the whole report: the kernel's cache
// topology in /sys (what Google Benchmark's context.caches shows too). sysconf() is the fallback
// only: glibc answers it from CPUID, which under virtualisation reports the physical host's
// cache (256 MiB where the guest's topology says 32 MiB).
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace fusebench::measure {

struct HostCache {
  std::size_t bytes = 0;  // 0: unknown
  int level = 0;
  std::string source;  // where the figure comes from, in words
};

// The largest data or unified cache of cpu0 in `sys_cache_dir` (index*/level, type, size), else
// sysconf's L3, else its L2.
HostCache host_last_level_cache(
    const std::string& sys_cache_dir = "/sys/devices/system/cpu/cpu0/cache");

nlohmann::json to_json(const HostCache& cache);

}  // namespace fusebench::measure

#include "preflight.hpp"

#include <cstdio>
#include <stdexcept>
#include <string>

#include "fusebench/ops.hpp"

namespace fusebench::bench {
namespace {

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

void check_fits_in_memory(const std::vector<Fixture>& fixtures, const Backend& backend) {
  const FreeMemory free = backend.free_memory();
  if (free.source.empty()) return;
  const Fixture* largest = nullptr;
  double largest_bytes = 0;
  for (const auto& f : fixtures) {
    // In-process TP ranks each hold a workspace in this process's memory.
    const double ranks = f.comm == "inprocess" ? f.shard.tp : 1;
    const double bytes =
        ranks *
        static_cast<double>(build_plan(f.op, f.variant, f.shard, f.tokens, f.dtype).total_bytes());
    if (bytes > largest_bytes) {
      largest_bytes = bytes;
      largest = &f;
    }
  }
  if (largest != nullptr && largest_bytes > static_cast<double>(free.bytes)) {
    throw std::invalid_argument(largest->name() + " needs " + gib(largest_bytes) +
                                " for its buffers, but " + gib(static_cast<double>(free.bytes)) +
                                " is free (" + free.source +
                                "): use fewer tokens, a smaller model or a lower tp");
  }
}

}  // namespace fusebench::bench

#include "preflight.hpp"

#include <cstdio>
#include <stdexcept>
#include <string>

#include "fusebench/checked_size.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/tp.hpp"

namespace fusebench::bench {
namespace {

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// What would make `f` fit. A higher tp shrinks one rank's shard (weights, outputs), except where
// every rank lives in this process (inprocess: the shards add up to the whole layer again) and
// for the collectives, whose messages are the pipelines' activations.
std::string fitting_advice(const Fixture& f) {
  std::string advice = "use fewer tokens (--tokens) or a smaller model";
  if (is_collective_op(f.op)) return advice;
  if (f.comm == "inprocess") {
    return advice + "; a higher --tp would not help here: the " + std::to_string(f.shard.tp) +
           " in-process ranks each hold their shard in this one process, so their shards add up "
           "to the whole layer";
  }
  return advice +
         ", or a higher --tp (one rank's shard holds 1/tp of the weights and outputs; its input "
         "activations stay whole)";
}

}  // namespace

std::uint64_t fixture_bytes(const Fixture& f) {
  try {
    const std::uint64_t plan_bytes = f.plan().total_bytes();
    // In-process TP ranks each hold a workspace in this process's memory.
    const int ranks = f.comm == "inprocess" ? f.shard.tp : 1;
    return size_mul(plan_bytes, ranks, [&] {
      return f.op + "/" + f.variant + " at --tokens=" + std::to_string(f.tokens) + ": the " +
             std::to_string(ranks) + " in-process ranks' buffers";
    });
  } catch (const SizeOverflow& e) {
    throw SizeOverflow(std::string(e.what()) + ", for model " + f.model.name +
                       ": use fewer tokens (--tokens)");
  }
}

void check_sizes(const std::vector<Fixture>& fixtures) {
  for (const auto& f : fixtures) fixture_bytes(f);
}

void check_fits_in_memory(const std::vector<Fixture>& fixtures, const Backend& backend) {
  const FreeMemory free = backend.free_memory();
  if (free.source.empty()) return;
  const Fixture* largest = nullptr;
  double largest_bytes = 0;
  for (const auto& f : fixtures) {
    const auto bytes = static_cast<double>(fixture_bytes(f));
    if (bytes > largest_bytes) {
      largest_bytes = bytes;
      largest = &f;
    }
  }
  if (largest != nullptr && largest_bytes > static_cast<double>(free.bytes)) {
    throw std::invalid_argument(largest->name() + " needs " + gib(largest_bytes) +
                                " for its buffers, but " + gib(static_cast<double>(free.bytes)) +
                                " is free (" + free.source + "): " + fitting_advice(*largest));
  }
}

}  // namespace fusebench::bench

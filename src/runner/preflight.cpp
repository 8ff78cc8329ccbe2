#include "preflight.hpp"

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

#include "fusebench/checked_size.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/routing.hpp"
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

// The kernel's estimate of what the host can allocate without swapping; 0 when unknown.
std::uint64_t host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kib = 0;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// The host memory the moe op takes to route its tokens, before its plan (and its buffers) exist:
// per slot (token x top_k) an expert id, a weight, a slot index, a row's token, scale and input
// scale (routing.hpp, ops/moe.cpp), and for the router source the hidden states and logits.
std::uint64_t moe_routing_bytes(const Fixture& f) {
  const MoeBlock& b = *f.shard.moe;
  const auto what = [&] {
    return "moe/" + f.variant + " at --tokens=" + std::to_string(f.tokens) + ": the routing";
  };
  const std::uint64_t slots = size_mul(f.tokens, b.rule.top_k, what);
  std::uint64_t bytes = size_mul(slots, 4 + 4 + 8 + 8 + 4 + 4, what);
  if (b.source.kind == RoutingKind::router)
    bytes = size_add(
        bytes, size_mul(size_mul(f.tokens, f.shard.hidden + b.rule.experts, what), 4, what), what);
  return bytes;
}

}  // namespace

void check_moe_routing_fits(const std::vector<Fixture>& fixtures) {
  std::uint64_t available = 0;
  bool read = false;
  for (const auto& f : fixtures) {
    if (!f.shard.moe) continue;  // the fixtures that route (the moe op's)
    if (!read) {
      available = host_available_bytes();
      read = true;
    }
    const std::uint64_t bytes = moe_routing_bytes(f);
    if (available > 0 && bytes > available) {
      throw std::invalid_argument(
          f.name() + ": routing " + std::to_string(f.tokens) + " tokens to " +
          std::to_string(f.shard.moe->rule.top_k) + " experts each needs " +
          gib(static_cast<double>(bytes)) + " of host memory before any buffer, but " +
          gib(static_cast<double>(available)) +
          " is available (MemAvailable in /proc/meminfo): use fewer tokens (--tokens)");
    }
  }
}

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
  check_moe_routing_fits(fixtures);  // before fixture_bytes builds (and routes) a plan
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

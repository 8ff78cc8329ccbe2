#include "measure/timing_policy.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace fusebench::measure {

Regime parse_regime(const std::string& text) {
  if (text == "cold") return Regime::cold;
  if (text == "batch") return Regime::batch;
  if (text == "eager") return Regime::eager;
  if (text == "graph") return Regime::graph;
  throw std::invalid_argument("--timing: unknown regime '" + text +
                              "' (valid: cold, batch, eager, graph)");
}

const char* to_string(Regime regime) {
  switch (regime) {
    case Regime::cold:
      return "cold";
    case Regime::batch:
      return "batch";
    case Regime::eager:
      return "eager";
    case Regime::graph:
      return "graph";
  }
  return "unknown";
}

bool regime_needs_gpu(Regime regime) { return regime != Regime::eager; }

Rotation rotation_sets(std::size_t bytes_per_set, std::size_t cache_bytes,
                       std::size_t memory_budget, std::size_t max_sets) {
  Rotation r;
  if (cache_bytes == 0) {
    r.reason = "cache size unknown: one set";
    return r;
  }
  // One set alone must move twice the cache between two of its uses, as the rotation below
  // guarantees: a set of 1-2x the cache would still find part of itself in L2.
  if (bytes_per_set == 0 || bytes_per_set >= 2 * cache_bytes) {
    r.reason = "one set exceeds twice the cache: no rotation needed";
    return r;
  }
  const std::size_t wanted = (2 * cache_bytes + bytes_per_set - 1) / bytes_per_set + 1;
  const std::size_t by_budget = std::max<std::size_t>(1, memory_budget / bytes_per_set);
  r.sets = std::min({wanted, by_budget, std::max<std::size_t>(1, max_sets)});
  r.covers_cache = r.sets == wanted;
  r.reason =
      std::to_string(r.sets) + " sets of " + std::to_string(bytes_per_set) + " B cycled (" +
      (r.covers_cache ? "others' bytes >= 2x cache between two uses of a set"
                      : "capped by memory budget or max sets: weights may stay partly cached") +
      ")";
  return r;
}

std::int64_t max_runs_behind_block(int model_launches_per_run) {
  constexpr std::int64_t kMaxQueuedLaunches = 128;
  return std::max<std::int64_t>(1, kMaxQueuedLaunches / (2 * std::max(1, model_launches_per_run)));
}

std::int64_t runs_per_sample(double run_estimate_s, double target_sample_s, std::int64_t max_runs) {
  max_runs = std::max<std::int64_t>(1, max_runs);
  if (!(run_estimate_s > 0) || !(target_sample_s > 0)) return 1;
  const double runs = std::ceil(target_sample_s / run_estimate_s);
  return runs >= static_cast<double>(max_runs)
             ? max_runs
             : std::max<std::int64_t>(1, static_cast<std::int64_t>(runs));
}

Decomposition decompose(const VariantTimes& b, const VariantTimes& v, double bandwidth) {
  if (!(bandwidth > 0)) throw std::invalid_argument("decompose: bandwidth must be positive");
  for (double t : {b.eager_s, b.device_s, v.eager_s, v.device_s}) {
    if (!(t > 0)) throw std::invalid_argument("decompose: times must be positive");
  }
  Decomposition d;
  d.total_s = b.eager_s - v.eager_s;
  d.host_launch_s = (b.eager_s - b.device_s) - (v.eager_s - v.device_s);
  d.device_s = b.device_s - v.device_s;
  d.bytes_saved = b.bytes - v.bytes;
  d.bytes_s = d.bytes_saved / bandwidth;
  d.device_overhead_s = d.device_s - d.bytes_s;
  d.launches_saved = b.launches - v.launches;
  if (d.launches_saved > 0) {
    d.device_overhead_per_launch_s = d.device_overhead_s / d.launches_saved;
    d.host_launch_per_launch_s = d.host_launch_s / d.launches_saved;
  }
  return d;
}

nlohmann::json to_json(const Decomposition& d) {
  nlohmann::json j = {
      {"total_saving_s", d.total_s},       {"host_launch_saving_s", d.host_launch_s},
      {"device_saving_s", d.device_s},     {"bytes_saved", d.bytes_saved},
      {"bytes_saving_s", d.bytes_s},       {"device_overhead_saving_s", d.device_overhead_s},
      {"launches_saved", d.launches_saved}};
  if (d.device_overhead_per_launch_s)
    j["device_overhead_per_launch_s"] = *d.device_overhead_per_launch_s;
  if (d.host_launch_per_launch_s) j["host_launch_per_launch_s"] = *d.host_launch_per_launch_s;
  return j;
}

}  // namespace fusebench::measure

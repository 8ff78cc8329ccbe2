#pragma once
// The one place a report's context and each entry's descriptive fields are assembled (the axes,
// quantization, weights), for every front end; what an entry measured is added by the group
// runner (entry_fields.hpp).
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "sweep.hpp"

namespace fusebench::bench {

// The entry's axes and how its weights and dtype were made: op, variant, model, layer, bias,
// activation, tokens, tp, dtype, backend, quant, comm, weights and their conversion.
nlohmann::json fixture_fields(const Fixture& f, const Backend& backend);

// What the run is, before anything is measured: the host and build (collect_context), the
// command line, the backend and why, the seed, the CPU threads, Google Benchmark's context, each
// model as read, the weights' sources, what the sweep left out and the model counters' meaning.
struct RunDescription {
  const std::vector<std::string>& args;
  std::string backend_reason;
  std::uint64_t seed = 0;
  nlohmann::json cpu_threads;
  std::map<std::string, std::string> benchmark_context;  // --benchmark_context
};
nlohmann::json run_context(const Sweep& sweep, const Backend& backend, const RunDescription& run);

}  // namespace fusebench::bench
